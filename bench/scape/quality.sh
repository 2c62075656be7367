#!/usr/bin/env bash
# SCAPE quality per byte, one command (docs/scape.md, "Quality benchmark"):
# 4 in-process ranks on the production DataParallelTrainer, the 7 methods
# (dense AdamW, dense AdamS, the authors' reference rule at 90% and 99%,
# our SCAPE at 90% and 99%, raw-gradient top-k AdamW at 99%), the same
# seeds, data order and step count for every method. Ends with ONE JSON line
#   {"regime", "steps", "seeds", "model", "methods": {NAME: {"val_mean",
#    "val_min", "val_max", "gap", "sparse_bytes_ratio", "target_bytes_ratio",
#    "avg_bytes_ratio"}}}
# and writes OUT/scape_quality_curves.svg (validation loss every 10% of the
# run, mean over seeds).
#
# Usage: bench/scape/quality.sh [--regime paper|harsh] [--steps N] [--seeds S]
#                               [--model M] [--data DIR] [--out DIR] [--jobs J]
#                               [--methods NAME,NAME,...]
#   paper (default): 2,000 steps, learning-rate warm-up 100, density linear
#          from 1 to the target over the first 200 steps, 3 seeds, tiny.
#   harsh: 400 steps, learning-rate warm-up 40, 40 dense steps, no ramp, 3 seeds.
# --steps scales the warm-up, the ramp and the dense steps with it (they are
# 5% / 10% / 10% of the run), so a shorter run keeps the regime's shape.
# --jobs: runs at a time (default 2).
# --methods: a subset of the methods, comma-separated (default all; the size
#   sweep runs fewer on the bigger models). dense AdamS is always run: every
#   gap is measured against it.
# Rerunning with the same --out keeps the runs that finished with the same
# flags (each run's flags are in OUT/NAME.seedK.flags): an interrupted
# benchmark picks up where it stopped.
set -euo pipefail
cd "$(dirname "$0")/../.."

REGIME=paper STEPS="" SEEDS=3 MODEL=tiny DATA=/tmp/fortunes-data OUT=/tmp/scape-quality JOBS=2 ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --regime) REGIME=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --methods) ONLY=$2; shift 2 ;;
    *) echo "quality.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$REGIME" in
  paper) STEPS=${STEPS:-2000}; LR_WARMUP=$((STEPS / 20)); RAMP=$((STEPS / 10)); DENSE=0 ;;
  harsh) STEPS=${STEPS:-400}; LR_WARMUP=$((STEPS / 10)); RAMP=0; DENSE=$((STEPS / 10)) ;;
  *) echo "quality.sh: --regime must be paper or harsh" >&2; exit 2 ;;
esac
mkdir -p "$OUT"

bazel build //client:corescape //tools/scape:corescape-scape-train 2>/dev/null
BIN="$OUT/corescape-scape-train"
cp -f bazel-bin/tools/scape/corescape-scape-train "$BIN"
if [ ! -f "$DATA/manifest.json" ]; then
  bazel-bin/client/corescape data prepare --input=/usr/share/games/fortunes --delimiter=% --output="$DATA" >/dev/null
fi

EVAL=$((STEPS / 10))
COMMON="--data=$DATA --model=$MODEL --ranks=4 --micro_batch=8 --seq_len=128 --steps=$STEPS --lr=2e-3 --lr_warmup=$LR_WARMUP --eval_interval=$EVAL --quiet"
# Every sparse method gets the regime's density schedule or dense steps.
if [ "$RAMP" -gt 0 ]; then
  SPARSE="--density_start=1 --density_warmup=$RAMP --density_start_step=0 --density_shape=linear --dense_warmup=0"
else
  SPARSE="--dense_warmup=$DENSE"
fi
REFERENCE="--method=scape --rule=reference --dense_small_tensors $SPARSE"
OURS="--method=scape --rule=catch-up --statistic=momentum-plus-scaled-residual --catch_up_exponent=0.65 $SPARSE"
METHODS=(
  "adamw|--method=adamw"
  "adams|--method=adams"
  "reference-90|$REFERENCE --density=0.1"
  "reference-99|$REFERENCE --density=0.01"
  "scape-90|$OURS --density=0.1"
  "scape-99|$OURS --density=0.01"
  "topk-adamw-99|--method=topk-adamw --density=0.01 $SPARSE"
)
if [ -n "$ONLY" ]; then
  selected=()
  for m in "${METHODS[@]}"; do
    case ",$ONLY,adams," in *",${m%%|*},"*) selected+=("$m") ;; esac
  done
  for name in ${ONLY//,/ }; do
    case " ${selected[*]%%|*} " in *" $name "*) ;; *) echo "quality.sh: unknown method '$name'" >&2; exit 2 ;; esac
  done
  METHODS=("${selected[@]}")
fi
NAMES=()
for m in "${METHODS[@]}"; do NAMES+=("${m%%|*}"); done
runs=()
for seed in $(seq 1 "$SEEDS"); do
  for m in "${METHODS[@]}"; do runs+=("${m%%|*}|$seed|${m#*|}"); done
done
# Finished: the log has its SUMMARY line and the flags match.
run_one() {
  local name=${1%%|*} rest=${1#*|}
  local seed=${rest%%|*} flags=${rest#*|}
  local stem="$OUT/$name.seed$seed" args="$COMMON $flags --seed=$seed --label=$name"
  if grep -q '^SUMMARY ' "$stem.log" 2>/dev/null && [ "$(cat "$stem.flags" 2>/dev/null)" = "$args" ]; then
    echo "$name seed $seed: kept from an earlier run" >&2
    return
  fi
  echo "$args" > "$stem.flags"
  if "$BIN" $args --csv="$stem.csv" > "$stem.log" 2>&1; then
    echo "$name seed $seed: done ($(date +%H:%M:%S))" >&2
  else
    echo "$name seed $seed failed: $(tail -1 "$stem.log")" >&2
  fi
}
export -f run_one
export BIN COMMON OUT
printf '%s\n' "${runs[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_one "$@"' _ {}

# Steps after the dense steps or the ramp run at the target density.
python3 bench/scape/quality_summary.py --regime "$REGIME" --steps "$STEPS" --seeds "$SEEDS" \
  --model "$MODEL" --out "$OUT" --svg "$OUT/scape_quality_curves.svg" \
  --target_from "$((RAMP > DENSE ? RAMP : DENSE))" "${NAMES[@]}"
