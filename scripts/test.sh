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

# The unit tests (beside the code; not the multi-process suites in tests/)
# again under AddressSanitizer + UBSan.
unit_dirs=(//runtime/... //scheduler/... //worker/... //attention_server/... //client/... //tools/...)
echo "== bazel test --config=asan (unit tests under ASan + UBSan)"
asan_log=$(mktemp)
bazel test --config=asan --test_summary=short --test_output=errors \
    --test_tag_filters=-gpu,-exclusive --build_tests_only "$@" -- \
    "${unit_dirs[@]}" 2>&1 | tee "$asan_log" | grep -E '^//|^Executed|ERROR' | sed 's/^\/\//asan: \/\//'
asan_status=${PIPESTATUS[0]}
asan_passed=$(count_passed "$asan_log")
asan_failed=$(count_failed "$asan_log")
if [[ $asan_status -ne 0 && $asan_failed -eq 0 ]]; then
  echo "asan: bazel test exited with status $asan_status"
  asan_failed=1
fi
passed=$((passed + asan_passed))
failed=$((failed + asan_failed))
rm -f "$asan_log"

# Every libFuzzer target (clang, ASan + UBSan), briefly; a crash fails it.
echo "== scripts/fuzz.sh --seconds ${CORESCAPE_FUZZ_SECONDS:-20}"
fuzz_log=$(mktemp)
./scripts/fuzz.sh --seconds "${CORESCAPE_FUZZ_SECONDS:-20}" 2>&1 | tee "$fuzz_log"
fuzz_status=${PIPESTATUS[0]}
fuzz_passed=$(count_passed "$fuzz_log")
fuzz_failed=$(count_failed "$fuzz_log")
if [[ $fuzz_status -ne 0 && $fuzz_failed -eq 0 ]]; then
  echo "fuzz.sh exited with status $fuzz_status"
  fuzz_failed=1
fi
passed=$((passed + fuzz_passed))
failed=$((failed + fuzz_failed))
rm -f "$fuzz_log"

if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  echo "== bazel build --config=cuda (nvcc found: GPU code must keep compiling)"
  if set -o pipefail; bazel build --config=cuda //worker:corescape-worker //runtime/comm:nccl_communicator \
       //attention_server:corescape-attention-server 2>&1 | tail -5; then
    passed=$((passed + 1))
    echo "//:cuda_build PASSED"
  else
    failed=$((failed + 1))
    echo "//:cuda_build FAILED"
  fi
fi

echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
