#!/usr/bin/env bash
# Runs the whole corescape test suite on a fresh Debian 12 machine: installs
# what is missing, builds everything (and the CUDA variants where nvcc
# exists), runs every test, and ends with the line "N passed, N failed".
# Exit status is non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT

passed=0
failed=0

echo "== bazel test //..."
bazel test //... --test_summary=short --test_output=errors "$@" 2>&1 | tee "$log"
bazel_status=${PIPESTATUS[0]}

# One line per test target: "//pkg:name   PASSED in 1.2s", "FAILED", ...
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE|FAILED TO BUILD)' "$log" || true)
if [[ $bazel_status -ne 0 && $failed -eq 0 ]]; then
  # The build or analysis failed before any test could report.
  echo "bazel test exited with status $bazel_status"
  failed=1
fi

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
