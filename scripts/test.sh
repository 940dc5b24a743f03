#!/usr/bin/env bash
# Runs the whole test suite, setting the machine up first if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The dashboard's end-to-end tests drive Debian's chromium (no browser download).
bash scripts/install_browser.sh
exec .venv/bin/python -m pytest "$@"
