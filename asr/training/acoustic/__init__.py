"""The acoustic model: audio -> phones, trained with CTC or CTC-CRF (`python -m asr.training`, `train.py`); its data
and augmentation, its criteria and its runs carried across working periods. README.md says which recipe made what."""
