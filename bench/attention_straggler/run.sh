#!/usr/bin/env bash
# Straggler removal on real processes: per-worker core-attention time and its
# spread across workers, colocated vs disaggregated, on a skewed batch
# (worker 0 one 2048-token document, the others 16 documents of 128), W = 2
# workers and S = 2 attention servers of one kernel thread each, pinned one
# per CPU. Prints the configuration, the tables and the step-time ratio.
#   bench/attention_straggler/run.sh [LAUNCHER FLAGS]   e.g. --workers=4 --tokens_per_worker=4096
# (flags: bazel-bin/bench/attention_straggler/attention_straggler --helpfull)
set -euo pipefail
cd "$(dirname "$0")/../.."
target=//bench/attention_straggler:attention_straggler
bazel build "$target" >/dev/null 2>&1 || bazel build "$target"
load=$(cut -d' ' -f1 /proc/loadavg)
echo "$(nproc) CPUs; load average before the run: $load"
if awk -v load="$load" 'BEGIN { exit !(load > 1.0) }'; then
  echo "warning: the machine is busy (load $load): other processes take CPU time from the" \
       "benchmark's; compare each process's CPU ms with its wall time" >&2
fi
exec bazel-bin/bench/attention_straggler/attention_straggler --rounds=3 "$@"
