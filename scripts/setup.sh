#!/usr/bin/env bash
# Set up a fresh machine for asr: system packages, then a virtualenv .venv with the package, the training
# stack (torch), the ONNX runtime, Ray (asr.transcribe --ray) and the test tools; then KenLM's build_binary and lmplz,
# compiled from kenlm's source distribution on PyPI (g++, zlib1g-dev, Boost): a word LM's fast-loading binary form,
# and the estimation of the second pass's 4-gram.
# Usage: bash scripts/setup.sh        (Debian/Ubuntu, run as root or with sudo available)
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    libportaudio2 sox espeak-ng flite festival festlex-cmu festvox-kallpc16k festvox-kdlpc16k \
    chromium chromium-driver g++ zlib1g-dev \
    libboost-program-options-dev libboost-system-dev libboost-thread-dev >/dev/null
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e ".[train,onnx,test,ray]"
bash scripts/build_kenlm.sh .venv/bin  # KenLM's build_binary (ARPA -> binary, asr.decoding.lm_binary) and lmplz (n-gram estimation)
