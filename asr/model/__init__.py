"""The acoustic model: sliding-window causal attention, the streaming encoder and its file format."""
