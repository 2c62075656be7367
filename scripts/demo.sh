#!/usr/bin/env bash
# The main job, end to end on one machine: installs what is missing, builds
# corescape, prepares the fortunes corpus, starts a local cluster (scheduler,
# 2 workers, 1 attention server on loopback), submits the tiny training job
# in examples/tiny-fortunes.json, shows its live progress, and ends with a
# summary and a loss plot.
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
bazel build //client:corescape
cli=bazel-bin/client/corescape

export CORESCAPE_HOME="${CORESCAPE_HOME:-$PWD/.cache/demo-home}"
mkdir -p "$CORESCAPE_HOME" .cache
if [[ ! -f .cache/fortunes/manifest.json ]]; then
  echo "== preparing the fortunes corpus (.cache/fortunes)"
  "$cli" data prepare --input=/usr/share/games/fortunes --delimiter=% --output=.cache/fortunes
fi

# A cluster left over from an earlier --keep run is stopped first, and each
# demo starts from an empty scheduler state.
"$cli" cluster down >/dev/null 2>&1 || true
rm -rf "$CORESCAPE_HOME/cluster" .cache/checkpoints/tiny-fortunes

echo "== corescape cluster up --workers 2 --attention-servers 1"
"$cli" cluster up --workers 2 --attention-servers 1
if [[ $keep -eq 0 ]]; then
  trap '"$cli" cluster down' EXIT
fi
echo
"$cli" nodes
echo
echo "== corescape submit examples/tiny-fortunes.json --wait"
job=$("$cli" submit examples/tiny-fortunes.json | tail -n 1)
echo "submitted $job"
status=0
"$cli" watch "$job" || status=$?
echo
"$cli" job "$job"
"$cli" plot "$job" --csv .cache/tiny-fortunes-loss.csv --svg .cache/tiny-fortunes-loss.svg
echo "loss curve: .cache/tiny-fortunes-loss.csv, .cache/tiny-fortunes-loss.svg"
if [[ $keep -eq 1 ]]; then
  echo
  echo "cluster left running (CORESCAPE_HOME=$CORESCAPE_HOME); stop it with:"
  echo "  CORESCAPE_HOME=$CORESCAPE_HOME $cli cluster down"
fi
exit $status
