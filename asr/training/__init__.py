"""Training with Lightning and Hydra: data, the CTC module, the structured config and the entry point.

    python -m asr.training experiment=mixture [overrides]

Nothing in the inference path imports this package.
"""
