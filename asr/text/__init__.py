"""Text out: the CTC units (`tokenizer`), the one normaliser (`normalize`), casing and punctuation (`restore`), the
written form of numbers (`written`), and the result formats (`formats`: txt, json, srt, vtt)."""
