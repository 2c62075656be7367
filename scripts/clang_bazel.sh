#!/usr/bin/env bash
# Runs bazel with clang-14 as the C++ compiler, in a Bazel output base of its
# own, so the default (gcc) build's configuration and cache stay untouched.
# The sanitizer build (--config=asan) and the libFuzzer build (--config=fuzz,
# scripts/fuzz.sh) run in it.
#   scripts/clang_bazel.sh COMMAND [ARGS...]
#   e.g. scripts/clang_bazel.sh test --config=asan //runtime/...
# CORESCAPE_CLANG_OUTPUT_BASE moves the output base (one per checkout on a
# shared machine).
set -euo pipefail
cd "$(dirname "$0")/.."
clang=$(command -v clang-14 || command -v clang || true)
[[ -n "$clang" ]] || { echo "clang_bazel.sh: clang not found (scripts/setup.sh installs clang-14)" >&2; exit 1; }
[[ $# -gt 0 ]] || { sed -n '2,10p' "$0"; exit 2; }
command=$1
shift
output_base=(--output_base="${CORESCAPE_CLANG_OUTPUT_BASE:-$HOME/.cache/corescape-clang-bazel}")
case "$command" in
  # Loading only: no toolchain, and these commands take no --repo_env.
  query|shutdown|clean|version) exec bazel "${output_base[@]}" "$command" "$@" ;;
  *) CC="$clang" exec bazel "${output_base[@]}" "$command" --repo_env=CC="$clang" "$@" ;;
esac
