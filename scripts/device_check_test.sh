#!/usr/bin/env bash
# scripts/device_check.sh on a workspace of its own (built by a Bazel of
# its own under TEST_TMPDIR): --package finds the gpu-tagged tests and
# benchmark by tag and nothing else, with their runfiles and the libraries
# of the programs in them (an end-to-end test's daemons), and refuses a
# package over the size limit; --run on this machine (no GPU: the device
# case skips) reports passes, skips, a failure and the benchmark's figures
# in its final JSON line, with each entry's log in OUT/logs; a benchmark cut
# off by its timeout keeps its figures and the daemon it left is killed;
# DEVICE_CHECK_ONLY / DEVICE_CHECK_ARGS run one binary with extra arguments
# (an unknown label is refused, with a JSON line); a workspace with nothing
# tagged gpu packages and runs nothing.
set -euo pipefail

RUNFILES="${TEST_SRCDIR}/${TEST_WORKSPACE}"
SCRIPT="${RUNFILES}/scripts/device_check.sh"
WS="${TEST_TMPDIR}/ws"
PY=/usr/bin/python3

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The fake workspace: this repository's offline rule stand-ins, a cuda
# config, one gpu-tagged gtest with a data file, one gpu-tagged shell test
# running a program of its runfiles, one untagged test, one gpu-tagged
# benchmark printing its figures.
mkdir -p "${WS}/fake" "${WS}/scripts" "${WS}/third_party"
# .bazelignore keeps the stand-ins out of runfiles: take them from the
# source tree the script's runfile links to.
REPO="$(cd "$(dirname "$(readlink -f "${SCRIPT}")")/.." && pwd)"
cp -rL "${REPO}/third_party/bazel" "${WS}/third_party/"
cp "${SCRIPT}" "${WS}/scripts/device_check.sh"
cat >"${WS}/WORKSPACE" <<'EOF'
workspace(name = "fakews")
local_repository(name = "rules_cc", path = "third_party/bazel/rules_cc")
local_repository(name = "rules_java", path = "third_party/bazel/rules_java")
local_repository(name = "remote_coverage_tools", path = "third_party/bazel/remote_coverage_tools")
EOF
cat >"${WS}/.bazelrc" <<'EOF'
build --nosandbox_debug --jobs=2 --cxxopt=-std=c++17
build:cuda --define=cuda=1 --platform_suffix=cuda
EOF
echo third_party/bazel >"${WS}/.bazelignore"
cat >"${WS}/fake/BUILD" <<'EOF'
cc_test(
    name = "fake_gpu_test",
    srcs = ["fake_gpu_test.cc"],
    data = ["fake_data.txt"],
    linkopts = ["-lgtest_main", "-lgtest", "-lpthread"],
    tags = ["gpu"],
)
cc_test(
    name = "cpu_only_test",
    srcs = ["fake_gpu_test.cc"],
    linkopts = ["-lgtest_main", "-lgtest", "-lpthread"],
)
sh_test(
    name = "fake_gpu_e2e_test",
    srcs = ["fake_gpu_e2e_test.sh"],
    data = [":fake_daemon"],
    tags = ["gpu"],
)
cc_binary(
    name = "fake_daemon",
    srcs = ["fake_daemon.cc"],
    linkopts = ["-lz"],
)
sh_binary(
    name = "fake_gpu_bench",
    srcs = ["fake_gpu_bench.sh"],
    tags = ["gpu"],
)
EOF
cat >"${WS}/fake/fake_gpu_test.cc" <<'EOF'
#include <cstdlib>
#include <fstream>
#include <string>
#include "gtest/gtest.h"
// Runs everywhere and reads its runfile.
TEST(Fake, ReadsItsDataFile) {
  const char* fail = std::getenv("FAKE_FAIL");
  EXPECT_TRUE(fail == nullptr || std::string(fail) != "1") << "asked to fail";
  std::ifstream in(std::string(std::getenv("TEST_SRCDIR")) + "/fakews/fake/fake_data.txt");
  std::string word;
  in >> word;
  EXPECT_EQ(word, "runfile");
}
// Needs a GPU: skips without one, as the real device tests do.
TEST(Fake, OnTheDevice) {
  if (std::ifstream("/dev/nvidiactl").fail()) GTEST_SKIP() << "no GPU";
  SUCCEED();
}
EOF
echo runfile >"${WS}/fake/fake_data.txt"
# An end-to-end test: a script driving a program that loads a library the
# script does not (zlib), as tests/ drive the daemons.
cat >"${WS}/fake/fake_daemon.cc" <<'EOF'
#include <zlib.h>
#include <cstdio>
int main() { std::printf("zlib %s\n", zlibVersion()); }
EOF
printf '#!/bin/sh\nexec "${TEST_SRCDIR}/fakews/fake/fake_daemon"\n' >"${WS}/fake/fake_gpu_e2e_test.sh"
chmod +x "${WS}/fake/fake_gpu_e2e_test.sh"
# Asked to hang (FAKE_HANG=1), it leaves a daemon in a session of its own,
# as the end-to-end tests' clusters do, and outlives its timeout.
cat >"${WS}/fake/fake_gpu_bench.sh" <<'EOF'
#!/bin/sh
echo "warming up"
echo "{\"fake_tflops\": 1.5, \"args\": \"$*\"}"
if [ "${FAKE_HANG:-0}" = 1 ]; then
  setsid sleep 300 </dev/null >/dev/null 2>&1 &
  sleep 60
fi
EOF
chmod +x "${WS}/fake/fake_gpu_bench.sh"

# A Bazel server of the test's own, ended when the test ends.
export BAZEL="bazel --output_base=${TEST_TMPDIR}/output_base --nohome_rc"
trap 'cd "${WS}" && ${BAZEL} shutdown >/dev/null 2>&1 || true' EXIT

cd "${TEST_TMPDIR}"
PKG="${TEST_TMPDIR}/package"
"${WS}/scripts/device_check.sh" --package "${PKG}" >package.log 2>&1 ||
  { cat package.log; fail "--package exited $?"; }
grep -q "packaged 3 targets (2 tests)" package.log || { cat package.log; fail "package summary"; }
[[ "$(cut -f1,2 "${PKG}/manifest.tsv" | sort)" == \
  "$(printf 'benchmark\t//fake:fake_gpu_bench\ntest\t//fake:fake_gpu_e2e_test\ntest\t//fake:fake_gpu_test')" ]] ||
  fail "manifest: $(cat "${PKG}/manifest.tsv")"
PACKED_LIBS="$(tar -tJf "${PKG}/lib.tar.xz")"
grep -q '^lib/libz\.so' <<<"${PACKED_LIBS}" ||
  fail "the library of a program in a test's runfiles is not packaged: ${PACKED_LIBS}"
[[ -x "${PKG}/device_check.sh" ]] || fail "the script travels with the package"
[[ -f "${PKG}/targets/fake__fake_gpu_test/fakews/fake/fake_data.txt" ]] ||
  fail "the test's runfiles are packaged"
[[ ! -L "${PKG}/targets/fake__fake_gpu_test/fakews/fake/fake_gpu_test" ]] ||
  fail "packaged files are copies, not links into this machine's output base"

# Over the limit: refused, naming the limit.
if DEVICE_CHECK_MAX_BYTES=1000 "${WS}/scripts/device_check.sh" --package "${TEST_TMPDIR}/big" \
  >big.log 2>&1; then
  fail "a package over DEVICE_CHECK_MAX_BYTES was accepted"
fi
grep -q "more than 1000 may travel" big.log || { cat big.log; fail "size error"; }

# The dry run: no GPU here, so the device case skips.
OUT_DIR="${TEST_TMPDIR}/out"
"${PKG}/device_check.sh" --run "${PKG}" "${OUT_DIR}" >run.log 2>&1 ||
  { cat run.log; fail "--run exited $?"; }
for f in summary.txt summary.json logs/fake__fake_gpu_test.xml logs/fake__fake_gpu_bench.log; do
  [[ -s "${OUT_DIR}/${f}" ]] || fail "--run wrote no ${f}"
done
tail -n 1 run.log | ${PY} -c '
import json, shutil, sys
r = json.loads(sys.stdin.read())
assert r["tests_failed"] == 0 and r["tests_timed_out"] == 0, r
if shutil.which("nvidia-smi") is None:
    assert r["gpu"] is None, r
    assert (r["tests_passed"], r["tests_skipped"]) == (2, 1), r
assert r["benchmarks_run"] == 1 and r["benchmarks_failed"] == 0, r
assert r["figures"] == {"fake_gpu_bench": {"fake_tflops": 1.5, "args": ""}}, r
assert r["complete"] is True, r
' || { cat run.log; fail "final JSON line"; }
# Each entry's line as it ended, before the summary.
grep -q "^RAN .*//fake:fake_gpu_bench  figures:" run.log || { cat run.log; fail "the benchmark's line"; }
grep -q "^SKIP .*//fake:fake_gpu_test\|^PASS .*//fake:fake_gpu_test" run.log ||
  { cat run.log; fail "summary line of the test"; }

# A benchmark cut off by its timeout keeps the figures it printed, and the
# daemon it left in its own session is killed.
if FAKE_HANG=1 DEVICE_CHECK_ONLY=//fake:fake_gpu_bench DEVICE_CHECK_BENCH_TIMEOUT_S=3 \
  "${PKG}/device_check.sh" --run "${PKG}" "${TEST_TMPDIR}/out-hang" >hang.log 2>&1; then
  fail "--run passed with a benchmark past its timeout"
fi
tail -n 1 hang.log | ${PY} -c '
import json, sys
r = json.loads(sys.stdin.read())
assert r["benchmarks_failed"] == 1 and r["complete"] is True, r
assert r["figures"] == {"fake_gpu_bench": {"fake_tflops": 1.5, "args": "", "cut_off": "TIMEOUT"}}, r
' || { cat hang.log; fail "a cut-off benchmark's figures"; }
grep -q "killed 1 process(es) it left running" hang.log || { cat hang.log; fail "the stray daemon"; }

# A short rerun: only the named binary, with the extra arguments given.
DEVICE_CHECK_ONLY=//fake:fake_gpu_bench \
  DEVICE_CHECK_ARGS='{"//fake:fake_gpu_bench": ["--lengths=4096", "--repeats=1"]}' \
  "${PKG}/device_check.sh" --run "${PKG}" "${TEST_TMPDIR}/out-only" >only.log 2>&1 ||
  { cat only.log; fail "--run with DEVICE_CHECK_ONLY exited $?"; }
tail -n 1 only.log | ${PY} -c '
import json, sys
r = json.loads(sys.stdin.read())
assert r["tests_passed"] == r["tests_failed"] == r["tests_skipped"] == 0, r
assert r["benchmarks_run"] == 1, r
(figures,) = r["figures"].values()
assert figures["args"] == "--lengths=4096 --repeats=1", figures
' || { cat only.log; fail "DEVICE_CHECK_ONLY / DEVICE_CHECK_ARGS"; }
if DEVICE_CHECK_ONLY=//fake:nothing "${PKG}/device_check.sh" --run "${PKG}" \
  "${TEST_TMPDIR}/out-unknown" >unknown.log 2>&1; then
  fail "--run accepted a DEVICE_CHECK_ONLY label that is not packaged"
fi
grep -q "names what is not packaged: //fake:nothing" unknown.log || { cat unknown.log; fail "unknown label message"; }
tail -n 1 unknown.log | ${PY} -c '
import json, sys
assert "not packaged" in json.loads(sys.stdin.read())["error"]
' || { cat unknown.log; fail "a refused run still ends with its JSON line"; }

# A failing test fails the run and is counted.
if FAKE_FAIL=1 "${PKG}/device_check.sh" --run "${PKG}" "${TEST_TMPDIR}/out-fail" \
  >fail.log 2>&1; then
  fail "--run passed with a failing test"
fi
tail -n 1 fail.log | ${PY} -c '
import json, sys
r = json.loads(sys.stdin.read())
assert r["tests_failed"] == 1, r
' || { cat fail.log; fail "failure count"; }

# Nothing tagged gpu: an empty package that runs nothing.
sed -i 's/tags = \["gpu"\],//' "${WS}/fake/BUILD"
"${WS}/scripts/device_check.sh" --package "${TEST_TMPDIR}/empty" >empty.log 2>&1 ||
  { cat empty.log; fail "--package with no gpu targets exited $?"; }
grep -q "no target is tagged gpu" empty.log || fail "empty package message"
OUT="${TEST_TMPDIR}/out-empty" "${TEST_TMPDIR}/empty/device_check.sh" --run "${TEST_TMPDIR}/empty" \
  >empty-run.log 2>&1 || { cat empty-run.log; fail "--run of an empty package exited $?"; }
tail -n 1 empty-run.log | ${PY} -c '
import json, sys
r = json.loads(sys.stdin.read())
assert r["tests_passed"] == r["tests_failed"] == r["benchmarks_run"] == 0, r
' || { cat empty-run.log; fail "empty run JSON"; }

echo PASS
