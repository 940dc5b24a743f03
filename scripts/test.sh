#!/usr/bin/env bash
# Runs the whole test suite, setting the machine up first if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
