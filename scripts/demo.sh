#!/usr/bin/env bash
# The main job: set up, profile the bundled CNN example on CPU, show the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${1:-./result}
.venv/bin/python examples/cnn_train.py --steps 20 --out "$OUT" --no-analyse
CAPTURE=$(ls -dt "$OUT"/*_mlprof | head -n 1)
.venv/bin/mlprof parse "$CAPTURE"
.venv/bin/mlprof query "$CAPTURE"
.venv/bin/mlprof advise "$CAPTURE"
echo "See it in the dashboard: .venv/bin/mlprof ui --logdir $OUT"
