#!/usr/bin/env bash
# Build the Kokoro English corpus (train_kokoro_en.jsonl + check_kokoro_en.jsonl) in resumable parts:
# each part extends the same deterministic sequence by STEP hours, so stopping anywhere loses at most the
# file being written, and re-running this command resumes (every finished FLAC is reused).
#   nohup nice -n 10 bash recipes/synthetic/kokoro_en_parts.sh TARGET_H [STEP_H] [JOBS] > data/synthetic/kokoro_en.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${1:-20}
STEP=${2:-0.5}
JOBS=${3:-2}
TEXT_DIR=${TEXT_DIR:-../shared/data/text}
OUT=${OUT:-data/synthetic}
export OMP_NUM_THREADS=1
for h in $(.venv-tts/bin/python -c "import math; t, s = $TARGET, $STEP; print(*[round(min(t, s * i), 3) for i in range(1, math.ceil(t / s) + 1)])"); do
    echo "=== part: up to $h h of kokoro_en ($(date -u +%H:%M:%S))"
    .venv-tts/bin/python recipes/synthetic/prepare.py --text-dir "$TEXT_DIR" --out "$OUT" \
        --engines kokoro_en --train-manifest train_kokoro_en.jsonl --hours-train "$h" --rounds 2 --jobs "$JOBS"
done
