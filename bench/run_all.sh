#!/usr/bin/env bash
# Every benchmark, one after the other (figures go to docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== core attention (bench/core_attention)"
bazel run //bench/core_attention:core_attention_bench 2>/dev/null
echo
echo "== training step vs PyTorch eager (bench/train_throughput)"
./bench/train_throughput/run.sh "${1:-2}"

echo
echo "== core-attention planner vs DistCA's greedy (bench/planner)"
bazel run //bench/planner:planner_bench -- --seeds=3 --repeats=5 2>/dev/null

echo
echo "== the scheduler's plans shipped ahead: adopting vs planning (bench/planner)"
bazel run -c opt //bench/planner:plan_adoption_bench -- --seeds=5 --repeats=9 2>/dev/null

echo
echo "== disaggregation at scale, simulated (bench/attention_sim)"
bazel run //bench/attention_sim:attention_sim -- --seeds=2 2>/dev/null

echo
echo "== disaggregated step with and without ping-pong, in-process (bench/ping_pong)"
bazel run //bench/ping_pong:ping_pong_bench -- --model=small --rows=2 --seq_len=2048 \
    --min_document=1024 --steps=3 2>/dev/null

echo
echo "== how evenly ping-pong's halves split, estimates on DistCA's lengths (bench/ping_pong)"
bazel run -c opt //bench/ping_pong:split_balance_bench 2>/dev/null

echo
echo "== straggler removal on real processes: colocated vs disaggregated (bench/attention_straggler)"
./bench/attention_straggler/run.sh

echo
echo "== data plane: collectives vs ucx_perftest (bench/comm)"
./bench/comm/run.sh

echo
echo "== SCAPE quality and volume, P=4 in-process ranks (bench/scape, ~5 min)"
./bench/scape/run.sh
echo
echo "== SCAPE step breakdown: own cost vs dense AdamS's step compute, small, P=2 (bench/scape)"
./bench/scape/step_breakdown.sh
echo
echo "== SCAPE mask coding per index vs copying the indices, small's range at d=0.1 (bench/mask_codec)"
bazel run -c opt //bench/mask_codec:mask_codec_bench -- --repeats=5 2>/dev/null
if [ "$(id -u)" = 0 ]; then
  echo
  echo "== SCAPE wall-clock with shaped links in network namespaces (bench/scape, root)"
  ./bench/scape/netns_wallclock.sh
fi
