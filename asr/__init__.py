"""asr: streaming English speech recognition with a sliding-window causal Transformer and CTC."""
