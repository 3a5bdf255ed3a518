#!/usr/bin/env bash
# The whole suite, on 2 cores: first everything not marked `serial`, in two processes (a test file to each
# at a time, so a module's fixtures and its tests' order stay in one process; the slowest files first, in the
# order tests/conftest.py gives them); then the `serial` tests alone,
# the ones that time or measure what a second busy core would disturb. Extra arguments go to both runs
# (bash scripts/test.sh tests/test_serve.py). Exits non-zero if either run failed; the second runs either
# way, so one call reports every failure. A run that the arguments leave without tests (pytest's 5) is fine.
cd "$(dirname "$0")/.."
status=0
pytest() {
    .venv/bin/python -m pytest "$@"
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then status=$rc; fi
}
pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not serial" "$@"
serial=("$@")  # without arguments: only the files that mark tests serial are collected (all of them take ~13 s)
[ $# -gt 0 ] || mapfile -t serial < <(grep -l "pytest.mark.serial" tests/test_*.py)
pytest -m serial "${serial[@]}"
exit $status
