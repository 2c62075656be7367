#!/usr/bin/env bash
# Runs the whole corescape test suite on a fresh Debian 12 machine: installs
# what is missing, builds everything (and the CUDA variants where nvcc
# exists), runs every test, the unit tests again under ASan + UBSan, and
# every fuzz target for a short while; ends with the line "N passed, N failed".
# Exit status is non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Result lines of a test log: "//pkg:name  PASSED in 1.2s", "FAILED", ...
count_passed() { grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$1" || true; }
count_failed() {
  grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE|FAILED TO BUILD)' "$1" || true
}

passed=0
failed=0
# Each stage's wall time, printed as it ends and again at the end.
stage_started=$SECONDS
timings=()
stage_done() {
  local took=$((SECONDS - stage_started))
  timings+=("$(printf '%-10s %4d s' "$1" "$took")")
  echo "== $1 took ${took} s"
  stage_started=$SECONDS
}

echo "== bazel test //..."
bazel test //... --test_summary=short --test_output=errors "$@" 2>&1 | tee "$log"
bazel_status=${PIPESTATUS[0]}

passed=$(count_passed "$log")
failed=$(count_failed "$log")
if [[ $bazel_status -ne 0 && $failed -eq 0 ]]; then
  # The build or analysis failed before any test could report.
  echo "bazel test exited with status $bazel_status"
  failed=1
fi
stage_done tests

# Runs one more stage (a command whose output has "//pkg:target PASSED|FAILED"
# lines), shows its result lines prefixed with $1, and adds its counts; a
# non-zero exit with no failed line counts as one failure.
run_stage() {
  local prefix=$1 stage_log
  shift
  stage_log=$(mktemp)
  "$@" 2>&1 | tee "$stage_log" | grep -E '^//|^Executed|ERROR|^==' | sed "s|^//|$prefix //|"
  local status=${PIPESTATUS[0]}
  local stage_passed stage_failed
  stage_passed=$(count_passed "$stage_log")
  stage_failed=$(count_failed "$stage_log")
  if [[ $status -ne 0 && $stage_failed -eq 0 ]]; then
    echo "$prefix $1 exited with status $status"
    stage_failed=1
  fi
  passed=$((passed + stage_passed))
  failed=$((failed + stage_failed))
  rm -f "$stage_log"
}

# The unit tests (beside the code; not the multi-process suites in tests/)
# again under AddressSanitizer + UBSan, built with clang.
unit_dirs=(//runtime/... //daemon/... //scheduler/... //worker/... //attention_server/... //client/... //tools/...)
echo "== scripts/clang_bazel.sh test --config=asan (unit tests under ASan + UBSan)"
run_stage asan: ./scripts/clang_bazel.sh test --config=asan --test_summary=short --test_output=errors \
    --test_tag_filters=-gpu,-exclusive --build_tests_only "$@" -- "${unit_dirs[@]}"
stage_done asan

# Every libFuzzer target (clang, ASan + UBSan, in the output base of the
# stage before), briefly; a crash fails it.
echo "== scripts/fuzz.sh --seconds ${CORESCAPE_FUZZ_SECONDS:-20}"
run_stage fuzz: ./scripts/fuzz.sh --seconds "${CORESCAPE_FUZZ_SECONDS:-20}"
stage_done fuzz

if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  # Over the default build's outputs: only what the CUDA define changes is
  # compiled again.
  echo "== bazel build --config=cuda_over_default (nvcc found: GPU code must keep compiling)"
  if set -o pipefail; bazel build --config=cuda_over_default //worker:all //runtime/comm:nccl_communicator \
       //attention_server:corescape-attention-server //runtime/device:all //runtime/kernels/cuda:all \
       //runtime/model:all //runtime/train:all //runtime/local:all //tools/train:all //bench/train_throughput:all \
       //client:corescape //tests:cuda_cluster_job_test \
       2>&1 | tail -5; then
    passed=$((passed + 1))
    echo "//:cuda_build PASSED"
  else
    failed=$((failed + 1))
    echo "//:cuda_build FAILED"
  fi
  stage_done cuda
fi
printf '== stage times:\n'
printf '   %s\n' "${timings[@]}"

echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
