"""Developer tools beside the recognizer: building and tuning the word LM, the attention benchmark."""
