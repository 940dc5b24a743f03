#!/usr/bin/env bash
# The main job: set up (torch CPU + mlprof's runtime dependencies, no test extras), profile the bundled
# CNN example on CPU, show the result. Set-up and training logs go to logs/; what is printed is the story.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${1:-./result}
mkdir -p logs
echo "training examples/cnn_train.py for 20 steps, profiling steps 3-6 (log: logs/demo_train.log) ..."
if ! .venv/bin/python examples/cnn_train.py --steps 20 --out "$OUT" --no-analyse >logs/demo_train.log 2>&1; then
  echo "the example failed; the last lines of logs/demo_train.log:" >&2
  tail -n 20 logs/demo_train.log >&2
  exit 1
fi
grep -E '^capture:|^  raw/' logs/demo_train.log || true
CAPTURE=$(ls -dt "$OUT"/*_mlprof | head -n 1)
.venv/bin/mlprof parse "$CAPTURE"
.venv/bin/mlprof query "$CAPTURE"
.venv/bin/mlprof advise "$CAPTURE"
echo "See it in the dashboard: .venv/bin/mlprof ui --logdir $OUT"
