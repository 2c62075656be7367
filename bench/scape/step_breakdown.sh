#!/usr/bin/env bash
# SCAPE's own cost per optimizer step (select, encode, pack, update) beside
# its communication waits and dense AdamS's step compute, on the `small`
# preset, P=2 in-process ranks on the production DataParallelTrainer, at
# d = 0.01 and d = 0.1. Ends with ONE JSON line:
#   {"overhead_share_99": X, "overhead_share_90": X}
# X = SCAPE's non-communication optimizer time per sparse step / dense
# AdamS's step compute (forward + backward + update), measured in this run.
#
# Usage: bench/scape/step_breakdown.sh [quick] [extra bench flags...]
#   quick: 2 timed steps x 1 round instead of 3 x 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${SCAPE_DATA:-/tmp/fortunes-data}
args=()
if [ "${1:-}" = quick ]; then
  args+=(--steps=2 --rounds=1)
  shift
fi
bazel build //client:corescape //bench/scape:step_breakdown_bench >/dev/null 2>&1 ||
  bazel build //client:corescape //bench/scape:step_breakdown_bench
if [ ! -f "$DATA/manifest.json" ]; then
  bazel-bin/client/corescape data prepare --input=/usr/share/games/fortunes --delimiter=% \
    --output="$DATA" >/dev/null
fi
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec bazel-bin/bench/scape/step_breakdown_bench --data="$DATA" --model=small --ranks=2 \
  --micro_batch=4 --seq_len=256 "${args[@]}" "$@"
