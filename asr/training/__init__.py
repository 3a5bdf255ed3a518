"""Training: one subpackage a trained thing, each with a README that says what it trains, from what, with which
recipe, and where the result ships.

    acoustic/   the acoustic model: python -m asr.training experiment=NAME [overrides] (Hydra, conf/)
    lm/         the word LMs: python -m asr.training.lm (n-gram), .lm.tune (its weights); the second pass's neural LM
    g2p/        the G2P and the pronunciation lexicon: python -m asr.training.g2p, .g2p.lexicon
    restorer/   casing and punctuation: python -m asr.training.restorer [restorer=small]
    finetune/   the shipped model fine-tuned on a user's recordings: python -m asr.finetune

hardware.py (the machine training runs on) and recipe.py (a recipe's resumable steps) serve them all.
Nothing in the inference path imports this package.
"""
