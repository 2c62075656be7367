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
echo "== disaggregation at scale, simulated (bench/attention_sim)"
bazel run //bench/attention_sim:attention_sim -- --seeds=2 2>/dev/null

echo
echo "== data plane: collectives vs ucx_perftest (bench/comm)"
./bench/comm/run.sh
