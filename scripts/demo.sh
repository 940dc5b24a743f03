#!/usr/bin/env bash
# The main job: set up (torch CPU + mlprof's runtime dependencies, no test extras), profile the bundled
# CNN example on CPU with `mlprof run` (the README's loop, its default window), show the result.
# Set-up and training logs go to logs/; what is printed is the story.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${1:-./result}
mkdir -p logs
echo "profiling examples/cnn_train.py (60 steps) under mlprof run (its output: logs/demo_run.log) ..."
if ! .venv/bin/mlprof run --output "$OUT" -- .venv/bin/python examples/cnn_train.py --no-profile --steps 60 \
    >logs/demo_run.log 2>&1; then
  echo "the profiled run failed; the last lines of logs/demo_run.log:" >&2
  tail -n 20 logs/demo_run.log >&2
  exit 1
fi
grep '^mlprof run: ' logs/demo_run.log || true
CAPTURE=$(ls -dt "$OUT"/*_mlprof | head -n 1)
.venv/bin/mlprof query "$CAPTURE"
.venv/bin/mlprof advise "$CAPTURE"
echo "Where the time is in your code: .venv/bin/mlprof callsites $CAPTURE"
echo "See it in the dashboard: .venv/bin/mlprof ui --logdir $OUT"
