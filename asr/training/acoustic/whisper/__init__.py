"""Whisper as a starting point and as a teacher of the acoustic model: experiments that lost, kept only to reproduce
the tables of benchmarks/ab/README.md and benchmarks/native/README.md (README.md here)."""
