"""Corpora: JSON Lines manifests (`manifest`), building one from recordings (`build`), and a model scored on one
(`evaluation`, with the error counts of `scoring`)."""
