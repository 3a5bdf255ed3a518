#!/usr/bin/env bash
# Build KenLM's build_binary (ARPA -> KenLM's memory-mapped binary format, which loads at once) from kenlm's
# source distribution on PyPI, into .venv/bin/build_binary. Needs g++ and zlib1g-dev (scripts/setup.sh installs
# them); the LM code needs neither Boost nor cmake (KenLM's own compile_query_only.sh compiles it the same way).
# Usage: bash scripts/build_kenlm.sh [OUT]   (OUT: .venv/bin/build_binary by default; PYTHON=... picks the python
# whose pip downloads the source, .venv/bin/python by default; JOBS=N compiles N files at a time, 2 by default)
# Then: python -m asr.decoding.lm_binary FILE.arpa.gz   (or recipes/lm/build.py, for the bundled LM)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=$(realpath -m "${1:-.venv/bin/build_binary}")
VERSION=0.3.0  # kenlm's sdist (LGPL-2.1): lm/build_binary_main.cc with lm/ and util/
JOBS=${JOBS:-2}
[ -x "$OUT" ] && { echo "$OUT is there"; exit 0; }
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -c "import setuptools" 2>/dev/null || "$PYTHON" -m pip install -q setuptools
# no build isolation: pip would otherwise build kenlm's build dependencies (cmake) from source to read its metadata
"$PYTHON" -m pip download -q --no-deps --no-binary :all: --no-build-isolation "kenlm==$VERSION" -d "$WORK"
tar xzf "$WORK/kenlm-$VERSION.tar.gz" -C "$WORK"
cd "$WORK/kenlm-$VERSION"
FLAGS="-w -I. -O2 -DNDEBUG -DKENLM_MAX_ORDER=6 -DHAVE_ZLIB -std=c++11"
sources=$(ls util/double-conversion/*.cc util/*.cc lm/*.cc | grep -v -e 'test\.cc$' -e 'main\.cc$')
printf '%s\n' $sources | xargs -P "$JOBS" -I{} sh -c 'g++ '"$FLAGS"' -c {} -o {}.o'
g++ $FLAGS lm/build_binary_main.cc $(printf '%s.o ' $sources) -o build_binary -lz -lrt -pthread
cd - >/dev/null
mkdir -p "$(dirname "$OUT")"
install -m 755 "$WORK/kenlm-$VERSION/build_binary" "$OUT"
echo "built $OUT"
