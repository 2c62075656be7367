# Shell helpers for tests that drive the `corescape` binary. The sourcing
# test sets CLI (the binary), OUT and ERR (files for the last run's output).

fail() {
  echo "FAIL: $*" >&2
  echo "--- stdout" >&2; cat "${OUT}" >&2
  echo "--- stderr" >&2; cat "${ERR}" >&2
  exit 1
}

# run WANT_EXIT_CODE ARGS...: runs the CLI, checks its exit code.
run() {
  local want="$1"; shift
  "${CLI}" "$@" >"${OUT}" 2>"${ERR}"
  local got=$?
  [[ "${got}" -eq "${want}" ]] || fail "corescape $*: exit ${got}, want ${want}"
}

stdout_has() { grep -qE -- "$1" "${OUT}" || fail "stdout lacks /$1/"; }
stderr_has() { grep -qE -- "$1" "${ERR}" || fail "stderr lacks /$1/"; }
stderr_one_error_line() {
  [[ "$(grep -c '^corescape: error: ' "${ERR}")" -eq 1 ]] || fail "want one error line"
}
