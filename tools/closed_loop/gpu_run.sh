#!/bin/sh
# On the GPU machine (device tool): the armed-but-idle hook's overhead against none, and the
# closed loop's capture of a latency spike on the GPU (the hook takes a profiler window at the
# next slow step of tools/closed_loop/spiky_loop.py). What it writes under $OUT becomes the
# fixture tests/fixtures/closed_loop/spiky_gpu and bench/results/hook_overhead_*.json.
set -e
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m bench.hook_overhead --device cuda --pairs 600 --block 100 --json "$OUT/hook_overhead.json"
work=$(mktemp -d)
mkdir -p "$work/cap/requests"
echo '{"id": 1, "kind": "profiler", "trigger": "slow_step", "steps": 30, "factor": 1.5, "expires_in": 600}' \
  > "$work/cap/requests/1.json"
TRACEDOC_CAPTURE_DIR="$work/cap" python3 tools/closed_loop/spiky_loop.py --device cuda --steps 400 --size 1024 \
  --period 7 --spike-ms 15 --out "$work/token_latency.jsonl"
cat "$work/cap/results/1.done.json"; echo
cp "$work/token_latency.jsonl" "$OUT/"
cp "$work"/cap/results/1/*.json.gz "$OUT/profiler_trace.json.gz"
