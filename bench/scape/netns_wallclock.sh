#!/usr/bin/env bash
# SCAPE wall-clock where the network is the bottleneck: P = 4 ranks, one
# process each (corescape-scape-rank), each in its own network namespace
# whose link to a shared bridge is shaped to --rate in both directions
# (tc tbf), over the UCX data plane (UCX_TLS=tcp). Trains dense AdamS,
# SCAPE 90% and SCAPE 99% with the same model, data, seed and steps, and
# prints per-method mean step time, communication time per step, bytes per
# step per worker, the ratios to dense AdamS and the time to a target loss
# (bench/scape/netns_summary.py).
#
# Usage (root; ~4 min with the defaults on 2 cores):
#   bench/scape/netns_wallclock.sh [--rate 1gbit|100mbit|none] [--model small] [--steps 40]
#       [--warmup 4] [--micro-batch 1] [--seq-len 128] [--lr 1e-3] [--methods "adams scape-90 scape-99"]
#       [--out DIR] [--bin DIR] [--data DIR] [--cleanup]
#
# --warmup W: the learning-rate warm-up, SCAPE's dense warm-up, and the
# steps left out of the per-step means (for every method).
# --bin DIR: use DIR/corescape-scape-rank (and DIR/corescape-data) instead of
# building them with -c opt in a separate output base (/tmp/scape_opt_base).
#
# --cleanup only removes what a previous run may have left (namespaces
# scape-wc-*, their links and processes) and exits. Addresses: 10.77.0.11-14/24,
# on links that exist only inside the namespaces this script creates.
set -euo pipefail
cd "$(dirname "$0")/../.."

RATE=1gbit
MODEL=small
STEPS=40
WARMUP=4
MICRO_BATCH=1
SEQ_LEN=128
LR=1e-3
METHODS="adams scape-90 scape-99"
OUT=/tmp/scape-netns
BIN_DIR=""
DATA=${SCAPE_DATA:-/tmp/fortunes-data}
CLEANUP_ONLY=0
P=4
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) RATE=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --micro-batch) MICRO_BATCH=$2; shift 2 ;;
    --seq-len) SEQ_LEN=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --methods) METHODS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --bin) BIN_DIR=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --cleanup) CLEANUP_ONLY=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "netns_wallclock.sh: needs root (ip netns, tc)" >&2
  exit 2
fi

# One run at a time: a second would delete the first one's namespaces.
exec 9> /tmp/scape-netns-wallclock.lock
if ! flock -n 9; then
  echo "netns_wallclock.sh: another run holds /tmp/scape-netns-wallclock.lock" >&2
  exit 1
fi

NS_BRIDGE=scape-wc-br
ns_rank() { echo "scape-wc-r$1"; }
PIDS=()

cleanup() {
  local pid ns
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^scape-wc-(br|r[0-9]+)$' || true); do
    # Processes a killed earlier run left inside (ours only: they live in
    # these namespaces), then the namespace with its links.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cleanup
[ "$CLEANUP_ONLY" -eq 1 ] && exit 0

setup_network() {
  ip netns add "$NS_BRIDGE"
  ip -n "$NS_BRIDGE" link set lo up
  ip -n "$NS_BRIDGE" link add br0 type bridge
  ip -n "$NS_BRIDGE" link set br0 up
  local r ns
  for r in $(seq 0 $((P - 1))); do
    ns=$(ns_rank "$r")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # eth0 inside the rank's namespace, its peer port$r on the bridge.
    ip -n "$ns" link add eth0 type veth peer name "port$r" netns "$NS_BRIDGE"
    ip -n "$ns" addr add "10.77.0.$((11 + r))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$NS_BRIDGE" link set "port$r" master br0
    ip -n "$NS_BRIDGE" link set "port$r" up
    if [ "$RATE" != none ]; then
      # Upload (rank -> bridge) and download (bridge -> rank): a full-duplex NIC.
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$RATE" burst 256kb latency 50ms
      ip netns exec "$NS_BRIDGE" tc qdisc add dev "port$r" root tbf rate "$RATE" burst 256kb latency 50ms
    fi
  done
}

if [ -z "$BIN_DIR" ]; then
  # A separate output base: -c opt here never evicts the shared fastbuild
  # cache, and no bazel-* symlinks, so the workspace's keep pointing at it.
  bazel --output_base=/tmp/scape_opt_base build -c opt --symlink_prefix=/ \
    //tools/scape:corescape-scape-rank //tools/data:corescape-data > "$OUT.build.log" 2>&1 || { tail -20 "$OUT.build.log"; exit 1; }
  BIN_DIR=$(bazel --output_base=/tmp/scape_opt_base info -c opt bazel-bin 2>/dev/null)
  BIN_DIR_TOOLS="$BIN_DIR/tools/scape"
  DATA_TOOL="$BIN_DIR/tools/data/corescape-data"
else
  BIN_DIR_TOOLS="$BIN_DIR"
  DATA_TOOL="$BIN_DIR/corescape-data"
fi
mkdir -p "$OUT"
RANK_BIN="$OUT/corescape-scape-rank"
cp -f "$BIN_DIR_TOOLS/corescape-scape-rank" "$RANK_BIN"
if [ ! -f "$DATA/manifest.json" ]; then
  "$DATA_TOOL" prepare --input=/usr/share/games/fortunes --delimiter=% --output="$DATA"
fi

setup_network

COMMON="--data=$DATA --model=$MODEL --ranks=$P --micro_batch=$MICRO_BATCH --seq_len=$SEQ_LEN
  --steps=$STEPS --lr=$LR --lr_warmup=$WARMUP --seed=1 --validate=false"
SCAPE="--method=scape --rule=catch-up --statistic=momentum-plus-scaled-residual
  --catch_up_exponent=0.65 --dense_warmup=$WARMUP"
method_flags() {
  case "$1" in
    adams) echo "--method=adams" ;;
    adamw) echo "--method=adamw" ;;
    scape-90) echo "$SCAPE --density=0.1" ;;
    scape-99) echo "$SCAPE --density=0.01" ;;
    *) echo "unknown method $1" >&2; return 1 ;;
  esac
}

echo "SCAPE wall-clock, network-bound: $(date -u '+%Y-%m-%d %H:%M UTC'), P=$P processes in" \
     "network namespaces, link rate $RATE each way (tc tbf, burst 256kb), UCX_TLS=tcp"
echo "model $MODEL, $MICRO_BATCH x $SEQ_LEN tokens per rank per step, $STEPS steps," \
     "lr $LR ($WARMUP warm-up steps, cosine), SCAPE dense warm-up $WARMUP steps, seed 1"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for method in $METHODS; do
  flags=$(method_flags "$method")
  dir="$OUT/$method"
  rm -rf "$dir" && mkdir -p "$dir/rendezvous"
  start_ms=$(date +%s%3N)
  PIDS=()
  for r in $(seq 0 $((P - 1))); do
    # shellcheck disable=SC2086
    ip netns exec "$(ns_rank "$r")" env UCX_TLS=tcp UCX_NET_DEVICES=eth0 \
      "$RANK_BIN" $COMMON $flags --rank="$r" --listen="10.77.0.$((11 + r)):0" \
      --rendezvous_dir="$dir/rendezvous" --job_id="wallclock-$method" --timeout_ms=120000 \
      --progress_every=10 --report_out="$dir/rank$r.json" > "$dir/rank$r.log" 2>&1 &
    PIDS+=($!)
  done
  failed=0
  for pid in "${PIDS[@]}"; do wait "$pid" || failed=1; done
  PIDS=()
  end_ms=$(date +%s%3N)
  if [ "$failed" -ne 0 ]; then
    echo "$method: a rank failed:" >&2
    tail -5 "$dir"/rank*.log >&2
    exit 1
  fi
  echo "$method: $STEPS steps in $(( (end_ms - start_ms) / 1000 )).$(( (end_ms - start_ms) % 1000 / 100 )) s (processes started to exited)"
done

python3 bench/scape/netns_summary.py --warmup "$WARMUP" --rate "$RATE" "$OUT" $METHODS
