#!/usr/bin/env bash
# The PyTorch baseline's wrapper on a machine without a CUDA PyTorch: it
# finds its script, refuses bad arguments naming them, and skips saying why
# (exit 0, a JSON-free "skipped:" line) — unless the device check says a GPU
# is there, where finding no CUDA PyTorch fails, naming the GPU.
set -euo pipefail

BIN="${TEST_SRCDIR}/${TEST_WORKSPACE}/bench/core_attention/torch_sdpa_bench"
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/bench/bench_test_lib.sh"

out="$("${BIN}" --lengths=256 --repeats=1)"
grep -q '^skipped: ' <<<"${out}" || { echo "FAIL: expected a skip, got: ${out}" >&2; exit 1; }

if gpu_out="$(DEVICE_CHECK_GPU="NVIDIA H200" "${BIN}" --lengths=256 --repeats=1 2>&1)"; then
  echo "FAIL: no CUDA PyTorch under the device check on a GPU passed: ${gpu_out}" >&2
  exit 1
fi
grep -q "no Python here has a PyTorch that sees NVIDIA H200" <<<"${gpu_out}" ||
  { echo "FAIL: the failure does not name the GPU: ${gpu_out}" >&2; exit 1; }

expect_refused "--lengths" "--lengths=abc" "${BIN}" --lengths=abc
expect_refused "--kv_heads" "16 heads over 3 kv heads" "${BIN}" --heads=16 --kv_heads=3
echo PASS
