#!/usr/bin/env bash
# Data-plane bandwidth: all_reduce and all_gather bus bandwidth (nccl-tests'
# definition) at P = 2 and 4, beside what a CPU user would pick instead
# (torch.distributed's Gloo backend, same processes, loopback and timing) and
# the transport's ceilings measured in the same run: ucx_perftest tag_bw one
# way, and two tag_bw pairs in opposite directions at once (a ring rank sends
# and receives at the same time, so that is the fair limit of an all-reduce).
#   bench/comm/run.sh [quick]
# Our side runs two schedules in the same processes, alternating size by
# size: "tuned" (the data plane's defaults) and "main" (the schedule before
# recursive-doubling gathers and bounded ring receives), so the table's
# "× main" column is an A/B taken in the same minute. The reduction kernel is
# compared with the plain loop it replaced by reduce_kernel_bench.
# "quick" measures 1 KiB, 64 KiB, 1 MiB, 16 MiB only. The last line is one
# JSON object: for TCP loopback, per P, the smallest ratio over the sizes
# >= 1 MiB of ours (tuned) to Gloo (all-reduce, all-gather) and to the
# bidirectional ceiling (all-reduce).
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=(//bench/comm:comm_bench //bench/comm:reduce_kernel_bench)
bazel build "${targets[@]}" >/dev/null 2>&1 || bazel build "${targets[@]}"
bench=bazel-bin/bench/comm/comm_bench
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[[ -n "${KEEP_RESULTS:-}" ]] && trap - EXIT

if [[ "${1:-}" == quick ]]; then
  sizes=(1024 65536 1048576 16777216)
else
  sizes=(1024 4096 16384 65536 262144 1048576 4194304 16777216 67108864 268435456)
fi
size_list=$(IFS=,; echo "${sizes[*]}")
port=$((20000 + RANDOM % 20000))

# name | UCX environment. "sm" sends small messages over shared memory and
# large ones as active-message fragments through it (UCX 1.13 gives the data
# plane's endpoints no rendezvous lane over it); the data plane's default is
# UCX_TLS=^sm (see docs/data_plane.md for which lanes UCX picks).
configs=("tcp|UCX_TLS=tcp" "sm|UCX_TLS=sm,tcp")

# Runs ranks 0..P-1 of a benchmark command (comm_bench or gloo_bench.py, which
# take the same flags) at once and appends rank 0's JSON lines, labelled with
# the transport $1, to the results. Usage: run_ranks LABEL P OP COMMAND...
run_ranks() {
  local label=$1 world=$2 op=$3 dir rank
  shift 3
  local pids=() failed=0 pid
  dir=$(mktemp -d -p "$out")
  for ((rank = 0; rank < world; rank++)); do
    "$@" --rank=$rank --world_size=$world --rendezvous_dir="$dir" --op=$op \
      --sizes="$size_list" --seconds_per_size=0.3 --max_iters=100 \
      >"$dir/out.$rank" 2>"$dir/err.$rank" &
    pids+=($!)
  done
  # (A bare `wait` returns 0 whatever its children returned.)
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  # (UCX prints its warnings on stdout: keep only the JSON lines.)
  if ((failed)) || ! grep -q "^{" "$dir/out.0"; then
    echo "$* failed ($label P=$world $op):" >&2
    tail -5 "$dir"/err.* >&2
    exit 1
  fi
  grep "^{" "$dir/out.0" | sed "s/^{/{\"transport\": \"$label\", /" >>"$out/results"
}

perftest_iters() {
  local iters=$(( 268435456 / $1 ))
  (( iters > 2000 )) && iters=2000
  (( iters < 8 )) && iters=8
  echo "$iters"
}

# One ucx_perftest tag_bw pair (server on $2, client dialing it) with the UCX
# environment $1 and message size $3; prints the client's final line.
perftest_pair() {
  local env_vars=$1 pair_port=$2 size=$3 iters
  iters=$(perftest_iters "$size")
  env $env_vars ucx_perftest -t tag_bw -s "$size" -n "$iters" -w 2 -p "$pair_port" \
    >/dev/null 2>&1 &
  local server=$!
  sleep 0.3
  env $env_vars timeout 120 ucx_perftest 127.0.0.1 -t tag_bw -s "$size" -n "$iters" \
    -w 2 -p "$pair_port" -f 2>/dev/null | tail -1 || true
  wait "$server" 2>/dev/null || true
}

for config in "${configs[@]}"; do
  name=${config%%|*}
  env_vars=${config#*|}
  # ucx_perftest tag_bw: one process sends, the other receives.
  for size in "${sizes[@]}"; do
    port=$((port + 1))
    line=$(perftest_pair "$env_vars" "$port" "$size")
    echo "{\"transport\": \"$name\", \"perftest_size\": $size, \"line\": \"$line\"}" >>"$out/results"
  done
  # Two pairs at once, one each way: the per-direction rate when both
  # directions are busy, as in a ring.
  for size in "${sizes[@]}"; do
    port=$((port + 2))
    perftest_pair "$env_vars" "$port" "$size" >"$out/bidir.a" &
    pair_a=$!
    perftest_pair "$env_vars" "$((port + 1))" "$size" >"$out/bidir.b"
    wait "$pair_a" || true
    echo "{\"transport\": \"$name\", \"perftest_bidir_size\": $size, \"lines\": [\"$(cat "$out/bidir.a")\", \"$(cat "$out/bidir.b")\"]}" >>"$out/results"
  done
  for world in 2 4; do
    for op in all_reduce all_gather; do
      run_ranks "$name" "$world" "$op" env $env_vars "$bench"
    done
  done
done

bazel-bin/bench/comm/reduce_kernel_bench >>"$out/results"

# Gloo (TCP over loopback) with the same sizes, processes and timing.
for world in 2 4; do
  for op in all_reduce all_gather; do
    run_ranks gloo "$world" "$op" /usr/bin/python3 bench/comm/gloo_bench.py
  done
done
echo "date: $(date -u +%Y-%m-%d); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); UCX $(ucx_info -v | sed -n 's/# Version //p')"
/usr/bin/python3 bench/comm/report.py "$out/results"
