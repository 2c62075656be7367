#!/usr/bin/env bash
# Builds every libFuzzer target (cc_fuzz_target: the parsers of outside
# input) with clang, ASan and UBSan, and fuzzes each for N seconds from its
# seed corpus, one target per core at a time. Prints one line per target ("//pkg:target PASSED|FAILED ...")
# and exits non-zero if any target crashed; crash inputs are kept under the
# output directory.
#   scripts/fuzz.sh [--seconds N] [--out DIR] [TARGET ...]
# Built by scripts/clang_bazel.sh, in the sanitizer build's output base.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=30
out=${TMPDIR:-/tmp}/corescape-fuzz
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    --out) out=$2; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "fuzz.sh: --seconds takes a positive integer" >&2; exit 2; }
clang_bazel=./scripts/clang_bazel.sh
# The project's own folders (a checkout's bazel-<dir> link must not be walked).
source_dirs="//runtime/... + //daemon/... + //scheduler/... + //worker/... + //attention_server/... + //client/... + //tools/..."
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <("$clang_bazel" query --noshow_progress \
    "kind(\"cc_binary\", rdeps($source_dirs, //fuzz:fuzz_target, 1))" 2>/dev/null | sort)
fi
[[ ${#targets[@]} -gt 0 ]] || { echo "fuzz.sh: no fuzz targets found" >&2; exit 1; }

echo "== building ${#targets[@]} fuzz targets (clang, ASan + UBSan)"
if ! "$clang_bazel" build --config=fuzz "${targets[@]}" >"$out.build.log" 2>&1; then
  tail -30 "$out.build.log"
  echo "fuzz.sh: build failed (log: $out.build.log)"
  exit 1
fi
bin_dir=$("$clang_bazel" info --config=fuzz bazel-bin 2>/dev/null)

# Fuzzes one target; prints its result line. Returns non-zero on a failure.
fuzz_one() {
  local target=$1 name binary work status runs
  name=${target#//}; name=${name/://}
  binary="$bin_dir/$name"
  work="$out/${name//\//_}"
  rm -rf "$work"; mkdir -p "$work/corpus" "$work/crashes"
  if ! CORESCAPE_FUZZ_WRITE_SEEDS="$work/corpus" timeout 60 "$binary" -runs=0 >"$work/seeds.log" 2>&1 ||
     [[ -z "$(ls "$work/corpus")" ]]; then
    echo "$target FAILED (could not write its seed corpus: $work/seeds.log)"
    return 1
  fi
  timeout $((seconds + 120)) "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/crashes/" "$work/corpus" >"$work/log" 2>&1
  status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  if [[ $status -eq 0 ]]; then
    echo "$target PASSED (${runs:-?} runs in ${seconds}s, corpus $(ls "$work/corpus" | wc -l) inputs)"
    return 0
  fi
  echo "$target FAILED (exit $status; crash inputs in $work/crashes; log $work/log):"
  grep -m5 -E 'ERROR|SUMMARY|runtime error' "$work/log" | sed 's/^/    /'
  return 1
}

# One fuzzer per core at a time (each is single-threaded): every target
# still fuzzes for the full --seconds. Each prints its lines when it ends.
parallel=$(nproc 2>/dev/null || echo 1)
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
running=0
index=0
for target in "${targets[@]}"; do
  if ((running >= parallel)); then
    wait -n
    running=$((running - 1))
  fi
  index=$((index + 1))
  (fuzz_one "$target" > "$results/$index.out"; echo $? > "$results/$index.rc"; cat "$results/$index.out") &
  running=$((running + 1))
done
wait
failed=0
for ((i = 1; i <= index; ++i)); do
  [[ "$(cat "$results/$i.rc" 2>/dev/null)" == 0 ]] || failed=$((failed + 1))
done
[[ $failed -eq 0 ]]
