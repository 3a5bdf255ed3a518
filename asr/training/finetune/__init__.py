"""Fine-tuning a trained model on a small corpus of your own (`python -m asr.finetune`, asr/finetune.py).

`pipeline` runs the steps in order, each kept in the output folder DIR so that a stopped run goes on from there:
the recordings as manifests (`manifests`) and their held-out test split (`split`); the starting model scored
(`report`); the small-data recipe (`recipe`, with its guard against forgetting: replay, or an anchor to the
starting model, asr/training/acoustic/anchor.py) trained within a time budget (`run`); the word LM (`lm`); the
export, the scores after, and the model card (`report`). Everything up to the split loads without torch, so
checking the data is quick and works on the runtime-only install.
"""
