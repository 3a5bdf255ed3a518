"""The streaming server behind `python -m asr.serve`: protocol, batching engine, WebSocket app."""
