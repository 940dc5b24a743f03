#!/usr/bin/env bash
# Sets up a fresh machine for mlprof: a virtual environment in .venv with the
# CPU build of torch (pinned: an unpinned torch pulls gigabytes of CUDA
# wheels) and mlprof with its runtime dependencies. Safe to run again.
#
#   bash scripts/setup.sh           what the demo runs: torch + mlprof's runtime dependencies
#   bash scripts/setup.sh --test    the test extras too (what scripts/test.sh runs)
#
# Every version comes from constraints.txt (the versions the tests run with), so a
# fresh machine gets the same ones. pip's output goes to logs/setup.log; stdout gets
# one line, and a failure prints the log's last lines.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_VERSION=${MLPROF_TORCH_VERSION:-2.13.0}
# Where pip finds the CPU build of torch (PyPI's Linux wheels pull CUDA); empty: the configured indexes only.
TORCH_INDEX=${MLPROF_TORCH_INDEX-https://download.pytorch.org/whl/cpu}
CONSTRAINTS=${MLPROF_CONSTRAINTS-constraints.txt}
EXTRAS=""
case "${1:-}" in
  --test) EXTRAS="[test]" ;;
  "") ;;
  *) echo "usage: bash scripts/setup.sh [--test]" >&2; exit 2 ;;
esac

mkdir -p logs
LOG=logs/setup.log
: > "$LOG"
fail() {
  echo "setup failed: $1; the last lines of $LOG:" >&2
  tail -n 20 "$LOG" >&2
  exit 1
}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv >>"$LOG" 2>&1 || fail "$PYTHON -m venv .venv"
fi
# --no-compile: pip compiles one file after another (76 s more for a fresh setup); the bytecode is compiled
# below on every core instead.
PIP=(.venv/bin/python -m pip install --disable-pip-version-check --no-input --no-compile)
if [ -n "$CONSTRAINTS" ]; then PIP+=(-c "$CONSTRAINTS"); fi
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" >/dev/null 2>&1; then
  # A wheel pip's configuration already holds (find-links: this project's machines keep the CPU build on
  # disk) needs no network; else the CPU index, where PyPI's Linux wheel would pull CUDA.
  if ! "${PIP[@]}" --no-index --no-deps "torch==$TORCH_VERSION" >>"$LOG" 2>&1; then
    TORCH_FROM=()
    if [ -n "$TORCH_INDEX" ]; then TORCH_FROM=(--extra-index-url "$TORCH_INDEX"); fi
    "${PIP[@]}" "${TORCH_FROM[@]}" "torch==$TORCH_VERSION" >>"$LOG" 2>&1 || fail "installing torch==$TORCH_VERSION"
  fi
  "${PIP[@]}" "torch==$TORCH_VERSION" >>"$LOG" 2>&1 || fail "installing torch's dependencies"
fi
"${PIP[@]}" -e ".$EXTRAS" >>"$LOG" 2>&1 || fail "installing mlprof${EXTRAS}"
# Bytecode, once for a new .venv, on every core (51 s of CPU for all of site-packages): Python would write it
# on first import, but not where PYTHONDONTWRITEBYTECODE is set (these machines), and then every `import torch`
# compiled torch's source again: 7.8 s of CPU instead of 2.8 s, in each of the test suite's many jobs.
# Once per set of extras installed (a later `--test` adds packages): .venv/.mlprof_bytecode lists them.
SITE=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if ! grep -qxF "${EXTRAS:-[runtime]}" .venv/.mlprof_bytecode 2>/dev/null; then
  .venv/bin/python -m compileall -q -j 0 "$SITE" >>"$LOG" 2>&1 || true  # a few template files never compile
  echo "${EXTRAS:-[runtime]}" >> .venv/.mlprof_bytecode
fi
# mlprof's own source (an editable install: pip compiles none of it).
.venv/bin/python -m compileall -q src/mlprof >>"$LOG" 2>&1 || fail "compiling mlprof"
# The start-up hook behind MLPROF_CONFIG_PATH / MLPROF_PROFILING_OPTIONS (no code change needed).
.venv/bin/python -m mlprof.collect.autostart --install >>"$LOG" 2>&1 || fail "installing the start-up hook"
.venv/bin/python - "$LOG" "${EXTRAS:-[runtime]}" <<'EOF'
import importlib.metadata as md, sys, mlprof, torch
print(f"set up .venv{sys.argv[2]}: mlprof {mlprof.__version__} with torch {torch.__version__}, "
      f"{len({d.metadata['Name'].lower() for d in md.distributions()})} packages (log: {sys.argv[1]})")
EOF
