#!/usr/bin/env bash
# Training tokens/s of corescape vs PyTorch eager on the same model, packed
# batch (4 documents per row) and thread count; prints the ratio.
#   bench/train_throughput/run.sh [THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
threads="${1:-2}"
bazel build //bench/train_throughput:train_step_bench >/dev/null 2>&1 || \
  bazel build //bench/train_throughput:train_step_bench
bench=bazel-bin/bench/train_throughput/train_step_bench
blas=$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || echo unknown)
echo "BLAS for both sides: $blas; threads: $threads; $(nproc) cores"
printf '%-6s %6s %5s %14s %14s %7s %12s %12s\n' model batch seq corescape_tok/s pytorch_tok/s ratio cs_peak_MB pt_peak_MB
for spec in "tiny 8 256 20" "small 4 512 5"; do
  read -r model batch seq steps <<<"$spec"
  cs=$("$bench" --model="$model" --batch="$batch" --seq="$seq" --steps="$steps" --threads="$threads")
  pt=$(/usr/bin/python3 bench/train_throughput/torch_train_step.py "$model" "$batch" "$seq" 4 "$steps" 2 "$threads")
  /usr/bin/python3 - "$cs" "$pt" <<'PY'
import json, sys
cs, pt = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{cs['model']:<6} {cs['batch']:>6} {cs['seq']:>5} {cs['tokens_per_s']:>14.0f} {pt['tokens_per_s']:>14.0f} "
      f"{cs['tokens_per_s'] / pt['tokens_per_s']:>6.2f}x {cs['peak_rss_mb']:>12.1f} {pt['peak_rss_mb']:>12.1f}")
PY
done
