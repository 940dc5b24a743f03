#!/usr/bin/env bash
# Sets up a fresh machine for mlprof: a virtual environment in .venv with the
# CPU build of torch (pinned: an unpinned torch pulls gigabytes of CUDA
# wheels) and mlprof with its test dependencies. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_VERSION=${MLPROF_TORCH_VERSION:-2.13.0}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  "${PIP[@]}" "torch==$TORCH_VERSION"
fi
"${PIP[@]}" -e ".[test]"
# The start-up hook behind MLPROF_CONFIG_PATH / MLPROF_PROFILING_OPTIONS (no code change needed).
.venv/bin/python -m mlprof.collect.autostart --install >/dev/null
.venv/bin/python -c "import mlprof, torch; print(f'mlprof {mlprof.__version__} with torch {torch.__version__} ready in .venv')"
