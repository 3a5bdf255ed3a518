#!/usr/bin/env bash
# Build two of KenLM's tools from kenlm's source distribution on PyPI into BIN (.venv/bin by default):
#   build_binary  ARPA -> KenLM's memory-mapped binary format, which loads at once (asr.decoding.lm_binary);
#                 needs g++ and zlib1g-dev only, as KenLM's own compile_query_only.sh compiles it;
#   lmplz         estimates a modified Kneser-Ney n-gram of any order from text (the second-pass 4-gram,
#                 recipes/lm/rescore.py); needs Boost's program_options, system and thread as well.
# scripts/setup.sh installs those packages and runs this. Where BIN has both already, nothing is done.
# Usage: bash scripts/build_kenlm.sh [BIN]   (PYTHON=... picks the python whose pip downloads the source,
# .venv/bin/python by default; JOBS=N compiles N files at a time, 2 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
BIN=$(realpath -m "${1:-.venv/bin}")
VERSION=0.3.0  # kenlm's sdist (LGPL-2.1): lm/ and util/, lm/builder/ and util/stream/ for lmplz
JOBS=${JOBS:-2}
[ -x "$BIN/build_binary" ] && [ -x "$BIN/lmplz" ] && { echo "$BIN/build_binary and $BIN/lmplz are there"; exit 0; }
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -c "import setuptools" 2>/dev/null || "$PYTHON" -m pip install -q setuptools
# no build isolation: pip would otherwise build kenlm's build dependencies (cmake) from source to read its metadata
"$PYTHON" -m pip download -q --no-deps --no-binary :all: --no-build-isolation "kenlm==$VERSION" -d "$WORK"
tar xzf "$WORK/kenlm-$VERSION.tar.gz" -C "$WORK"
cd "$WORK/kenlm-$VERSION"
FLAGS="-w -I. -O2 -DNDEBUG -DKENLM_MAX_ORDER=6 -DHAVE_ZLIB -std=c++11"
compile() { printf '%s\n' "$@" | xargs -P "$JOBS" -I{} sh -c 'g++ '"$FLAGS"' -c {} -o {}.o'; }
objects() { printf '%s.o ' "$@"; }
query=$(ls util/double-conversion/*.cc util/*.cc lm/*.cc | grep -v -e 'test\.cc$' -e 'main\.cc$')
compile $query
g++ $FLAGS lm/build_binary_main.cc $(objects $query) -o build_binary -lz -lrt -pthread
builder=$(ls util/stream/*.cc lm/common/*.cc lm/builder/*.cc | grep -v -e 'test\.cc$' -e 'main\.cc$')
compile $builder
g++ $FLAGS lm/builder/lmplz_main.cc $(objects $builder $query) -o lmplz \
    -lboost_program_options -lboost_system -lboost_thread -lz -lrt -pthread
mkdir -p "$BIN"
install -m 755 build_binary lmplz "$BIN/"
echo "built $BIN/build_binary and $BIN/lmplz"
