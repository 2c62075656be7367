#!/usr/bin/env bash
# SCAPE quality and volume benchmark: dense AdamW, dense AdamS, SCAPE at 90%
# and 99% sparsity, raw-gradient top-k AdamW at 99% (and per-rank global
# top-k SCAPE at 99%, to show fill-in), P=4 in-process ranks, the tiny model
# on Debian's fortunes, same seed, data order and step count for every
# method. Prints final validation loss and bytes per step per worker (from
# the RankGroup's ring byte counters) with the ratio to a dense all-reduce,
# and writes the loss curves (CSV) and one SVG plot.
#
# Usage: bench/scape/run.sh [OUT_DIR] [STEPS]     (defaults: /tmp/scape-bench, 400)
# Two runs at a time; ~3 min per run on 2 idle cores (tiny model, 400 steps).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/scape-bench}
STEPS=${2:-400}
DATA=${SCAPE_DATA:-/tmp/fortunes-data}
mkdir -p "$OUT"

bazel build //client:corescape //tools/scape:corescape-scape-train 2>/dev/null
BIN="$OUT/corescape-scape-train"
cp -f bazel-bin/tools/scape/corescape-scape-train "$BIN"
if [ ! -f "$DATA/manifest.json" ]; then
  bazel-bin/client/corescape data prepare --input=/usr/share/games/fortunes --delimiter=% --output="$DATA"
fi

COMMON="--data=$DATA --model=tiny --ranks=4 --micro_batch=8 --seq_len=128 --steps=$STEPS --lr=2e-3 --lr_warmup=40 --seed=1 --eval_interval=50 --quiet"
# The shipped SCAPE formulation (docs/scape.md): catch-up of K^α steps,
# mask statistic |β1·m + P·e^r|, dense warm-up = the learning-rate warm-up.
SCAPE="--method=scape --rule=catch-up --statistic=momentum-plus-scaled-residual --dense_warmup=40"
runs=(
  "adamw|--method=adamw"
  "adams|--method=adams"
  "scape-90|$SCAPE --density=0.1 --catch_up_exponent=0.65"
  "scape-99|$SCAPE --density=0.01 --catch_up_exponent=0.65"
  "topk-adamw-99|--method=topk-adamw --density=0.01"
  "scape-global-99|--method=scape-global --rule=catch-up --statistic=momentum-plus-scaled-residual --dense_warmup=40 --density=0.01 --catch_up_exponent=0.65"
)
run_one() {
  local name=${1%%|*} flags=${1#*|}
  "$BIN" $COMMON $flags --label="$name" --csv="$OUT/$name.csv" > "$OUT/$name.log" 2>&1 \
    || echo "$name failed: $(tail -1 "$OUT/$name.log")" >&2
}
export -f run_one
export BIN COMMON OUT
printf '%s\n' "${runs[@]}" | xargs -P 2 -I{} bash -c 'run_one "$@"' _ {}

echo "SCAPE benchmark, $(date -u +%Y-%m-%d), $STEPS steps, P=4 in-process ranks, tiny model, fortunes"
python3 bench/scape/summarize.py "$OUT"/{adamw,adams,scape-90,scape-99,topk-adamw-99,scape-global-99}.log
python3 bench/scape/plot_curves.py "$OUT/scape_loss_curves.svg" \
  "dense AdamW=$OUT/adamw.csv" "dense AdamS=$OUT/adams.csv" "SCAPE 90%=$OUT/scape-90.csv" \
  "SCAPE 99%=$OUT/scape-99.csv" "top-k AdamW 99%=$OUT/topk-adamw-99.csv"
echo "curves: $OUT/*.csv, plot: $OUT/scape_loss_curves.svg"
