#!/usr/bin/env bash
# Runs the whole test suite, setting the machine up first if needed.
# The suite runs on every core (up to 4 pytest-xdist workers; MLPROF_TEST_WORKERS=1 runs it in one process).
# Tests that judge the timings of real runs still run alone: see tests/conftest.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# The dashboard's end-to-end tests drive Debian's chromium (no browser download).
bash scripts/install_browser.sh
workers=${MLPROF_TEST_WORKERS:-$(nproc)}
if [ "$workers" -gt 4 ]; then workers=4; fi
parallel=()
if [ "$workers" -gt 1 ]; then parallel=(-n "$workers" --dist loadgroup); fi
exec .venv/bin/python -m pytest "${parallel[@]}" "$@"
