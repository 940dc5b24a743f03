#!/bin/bash
# The GPU check of the parse at scale, for a machine with an NVIDIA GPU and torch but without mlprof's
# dependencies (README: "On a GPU machine"): a real training loop profiled by torch
# (tests/data/make_h200_trace.py, STEPS steps), parsed whole and in stretches (a 256 MiB budget, and
# forced 100,000-event stretches), the tables compared row for row, then advise and export on it.
# Results go to $OUT/gpu_check.txt (or ./gpu_check.txt).
#
#   STEPS=400 bash scripts/gpu_check.sh
set -u
R=$(cd "$(dirname "$0")/.." && pwd); W=$(mktemp -d); LOG=${OUT:-.}/gpu_check.txt
exec > >(tee "$LOG") 2>&1
if ls "$R"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$R"/.whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$R/src
else
  export PYTHONPATH=$R/src
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; echo "$(nproc) cores"
python3 -c "import torch, duckdb, msgspec; print('torch', torch.__version__, 'duckdb', duckdb.__version__)" || exit 1
timeout 300 python3 "$R/tests/data/make_h200_trace.py" "$W/gpu.json" "${STEPS:-400}" 2>&1 | grep -v "^\[W\|USDT" || exit 2
cd "$R"
pss() { timeout 300 python3 -c "
import sys; sys.path.insert(0, 'benchmarks')
from analyses_memory import run_command
r = run_command(sys.argv[1], sys.argv[2:])
print(f\"{r['what']:14s} {r['wall_s']:7.2f} s {r['peak_pss_bytes'] / 2**20:6.0f} MiB  exit {r['exit']} {r.get('error', '')}\")" "$@"; }
pss whole parse "$W/gpu.json" --output "$W/whole" --tables-only --no-progress --memory-budget 8G
pss default parse "$W/gpu.json" --output "$W/default" --tables-only --no-progress
pss 256M parse "$W/gpu.json" --output "$W/b256" --tables-only --no-progress --memory-budget 256M
MLPROF_SEGMENT_EVENTS=100000 pss stretches parse "$W/gpu.json" --output "$W/forced" --tables-only --no-progress
status=0
for d in default b256 forced; do python3 benchmarks/tables_diff.py "$W/whole/tables" "$W/$d/tables" || status=3; done
pss advise advise "$W/b256"
pss export export "$W/b256" --output "$W/export"
python3 -m mlprof advise "$W/b256" | head -8
rm -rf "$W"
exit $status
