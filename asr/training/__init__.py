"""Training with Lightning and Hydra: data, the CTC module, the structured config and the entry point.

    python -m asr.training experiment=mixture [overrides]
    python -m asr.training.lm --out lm.arpa TEXT_OR_MANIFEST...  # the word LM, from training text
    python -m asr.training.tune_lm --manifest DEV.jsonl ...      # its weight and word score, on a dev set

Nothing in the inference path imports this package.
"""
