#!/usr/bin/env bash
# The PyTorch baseline's wrapper on a machine without a CUDA PyTorch: it
# finds its script, refuses bad arguments naming them, and skips saying why
# (exit 0, a JSON-free "skipped:" line).
set -euo pipefail

BIN="${TEST_SRCDIR}/${TEST_WORKSPACE}/bench/core_attention/torch_sdpa_bench"

out="$("${BIN}" --lengths=256 --repeats=1)"
grep -q '^skipped: ' <<<"${out}" || { echo "FAIL: expected a skip, got: ${out}" >&2; exit 1; }

if err="$("${BIN}" --lengths=abc 2>&1)"; then
  echo "FAIL: --lengths=abc accepted" >&2
  exit 1
fi
grep -q -- "--lengths" <<<"${err}" || { echo "FAIL: the refusal does not name --lengths: ${err}" >&2; exit 1; }

if err="$("${BIN}" --heads=16 --kv_heads=3 2>&1)"; then
  echo "FAIL: 16 heads over 3 kv heads accepted" >&2
  exit 1
fi
grep -q -- "--kv_heads" <<<"${err}" || { echo "FAIL: the refusal does not name --kv_heads: ${err}" >&2; exit 1; }
echo PASS
