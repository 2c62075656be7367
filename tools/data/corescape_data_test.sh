#!/usr/bin/env bash
# corescape-data end to end: exit codes, prepare on a small fortune-style
# corpus, inspect of a shard and a dataset, and a corrupted shard.
set -uo pipefail

tool="$1"
work="${TEST_TMPDIR:-/tmp}/corescape_data_test"
rm -rf "$work" && mkdir -p "$work/corpus"
failures=0

expect_exit() {  # expect_exit CODE DESCRIPTION COMMAND...
  local want="$1" what="$2"
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL: $what: exit $got, want $want"
    sed 's/^/  out: /' "$work/out"; sed 's/^/  err: /' "$work/err"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

expect_text() {  # expect_text FILE TEXT DESCRIPTION
  if ! grep -qF -- "$2" "$1"; then
    echo "FAIL: $3: no \"$2\" in $1:"; sed 's/^/  /' "$1"
    failures=$((failures + 1))
  fi
}

for i in $(seq 1 30); do
  printf 'Fortune number %d.\n\t-- Author %d\n%%\n' "$i" "$i" >> "$work/corpus/one"
done
printf 'A lonely fortune\n%%\n\n%%\nThe last one, unterminated' > "$work/corpus/two"
printf '\0\0\0\2binary index' > "$work/corpus/one.dat"

expect_exit 2 "no arguments" "$tool"
expect_exit 0 "--help" "$tool" --help
expect_text "$work/out" "corescape-data prepare" "help text"
expect_exit 2 "unknown command" "$tool" frobnicate
expect_exit 2 "unknown flag" "$tool" prepare --input="$work/corpus" --output="$work/out1" --bogus=1
expect_text "$work/err" "unknown flag --bogus=1" "unknown flag message"
expect_exit 2 "flag of another command" "$tool" inspect --seed=3 "$work/x"
expect_exit 2 "missing --output" "$tool" prepare --input="$work/corpus"
expect_exit 2 "bad number" "$tool" prepare --input="$work/corpus" --output="$work/d" --seed=abc
expect_exit 2 "inspect without a path" "$tool" inspect

expect_exit 0 "prepare" "$tool" prepare --input="$work/corpus" --delimiter=% \
  --output="$work/data" --validation_fraction=0.1 --seed=3
expect_text "$work/out" "documents                  32 (" "document count"
expect_text "$work/out" "validation                 3 documents" "validation count"
expect_text "$work/out" "train unigram entropy" "entropy line"
[[ -f "$work/data/manifest.json" && -f "$work/data/train-00000.shard" ]] ||
  { echo "FAIL: prepare wrote no manifest or shard"; failures=$((failures + 1)); }

expect_exit 0 "inspect shard" "$tool" inspect "$work/data/train-00000.shard" --documents=2
expect_text "$work/out" "documents        29" "shard document count"
expect_text "$work/out" "tokenizer        byte" "tokenizer from manifest"
expect_text "$work/out" "  | " "decoded document"
expect_exit 0 "inspect dataset" "$tool" inspect "$work/data"
expect_text "$work/out" "all shards verified" "dataset verification"

expect_exit 1 "missing input" "$tool" prepare --input="$work/nope" --output="$work/d2"
expect_text "$work/err" "no such input $work/nope" "missing input message"
mkdir -p "$work/empty" && printf '%%\n  \n%%\n' > "$work/empty/blank"
expect_exit 1 "empty corpus" "$tool" prepare --input="$work/empty" --delimiter=% --output="$work/d3"
expect_text "$work/err" "the corpus is empty" "empty corpus message"

cp "$work/data/train-00000.shard" "$work/bad.shard"
printf '\x7f' | dd of="$work/bad.shard" bs=1 seek=100 conv=notrunc status=none
expect_exit 1 "corrupted shard" "$tool" inspect "$work/bad.shard"
expect_text "$work/err" "payload checksum mismatch" "checksum message"
expect_text "$work/err" "$work/bad.shard" "file named"
head -c 50 "$work/data/train-00000.shard" > "$work/short.shard"
expect_exit 1 "truncated shard" "$tool" inspect "$work/short.shard"
expect_text "$work/err" "shorter than the 64-byte header" "truncation message"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
