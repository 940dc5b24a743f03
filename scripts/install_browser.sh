#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's end-to-end tests (tests/ui/test_e2e.py),
# which drive it with Playwright for Python through its executable path. Idempotent:
# does nothing when /usr/bin/chromium exists. Never downloads a browser build of its
# own (`playwright install` is not used). Needs root (CI runs as root on Debian).
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser.sh: no apt-get here; install chromium yourself (the e2e tests skip without it)" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install_browser.sh: not root and no sudo; the e2e tests will skip" >&2
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium
