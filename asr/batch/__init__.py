"""Many files at once: padded batches (`padded`), worker processes on one machine (`processes`), a Ray cluster
(`cluster`) in resumable shards (`shards`), and the choice between them that the command line makes (`files`)."""
