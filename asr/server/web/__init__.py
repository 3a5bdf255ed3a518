"""The browser page served at GET / by `python -m asr.serve` (static files, nothing fetched at run time)."""
