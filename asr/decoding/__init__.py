"""CTC decoding: greedy best path, the lexicon beam search with a word LM, and the one `Decoder` over both."""
