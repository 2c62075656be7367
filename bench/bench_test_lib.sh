# Shell helpers for the tests of benchmark binaries.

# expect_refused NEEDLE WHAT COMMAND...: COMMAND must fail, and its output
# must name NEEDLE (WHAT says what was asked for, in the failure message).
expect_refused() {
  local needle="$1" what="$2" err
  shift 2
  if err="$("$@" 2>&1)"; then
    echo "FAIL: ${what} accepted" >&2
    exit 1
  fi
  grep -q -- "${needle}" <<<"${err}" ||
    { echo "FAIL: the refusal does not name ${needle}: ${err}" >&2; exit 1; }
}
