#!/usr/bin/env bash
# The main job, end to end on one machine: installs what is missing, builds
# corescape, starts a local cluster (scheduler, 2 workers, 1 attention
# server on loopback), shows its nodes and status, and stops it again.
#   --keep   leave the cluster running (stop it with: bazel-bin/client/corescape cluster down)
set -euo pipefail
cd "$(dirname "$0")/.."

keep=0
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    *) echo "usage: $0 [--keep]" >&2; exit 2 ;;
  esac
done

./scripts/setup.sh
echo "== building corescape"
bazel build //client:corescape //scheduler:corescape-scheduler //worker:corescape-worker \
  //attention_server:corescape-attention-server
cli=bazel-bin/client/corescape

export CORESCAPE_HOME="${CORESCAPE_HOME:-$PWD/.cache/demo-home}"
mkdir -p "$CORESCAPE_HOME"
# A cluster left over from an earlier --keep run is stopped first.
"$cli" cluster down >/dev/null 2>&1 || true
# Each demo starts from an empty scheduler state.
rm -rf "$CORESCAPE_HOME/cluster"

echo "== corescape cluster up --workers 2 --attention-servers 1"
"$cli" cluster up --workers 2 --attention-servers 1
if [[ $keep -eq 0 ]]; then
  trap '"$cli" cluster down' EXIT
fi

echo
echo "== corescape nodes"
"$cli" nodes
echo
echo "== corescape status"
"$cli" status
echo
echo "== corescape nodes --json"
"$cli" nodes --json

if [[ $keep -eq 1 ]]; then
  echo
  echo "cluster left running (CORESCAPE_HOME=$CORESCAPE_HOME); stop it with:"
  echo "  CORESCAPE_HOME=$CORESCAPE_HOME $cli cluster down"
fi
