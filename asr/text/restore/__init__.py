"""Casing and punctuation of finals: labels, scores, the network and its torch-free runtime."""
