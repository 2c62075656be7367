#!/usr/bin/env bash
# Every benchmark, one after the other (figures go to docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== core attention (bench/core_attention)"
bazel run //bench/core_attention:core_attention_bench 2>/dev/null
echo
echo "== training step vs PyTorch eager (bench/train_throughput)"
./bench/train_throughput/run.sh "${1:-2}"
