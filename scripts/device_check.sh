#!/usr/bin/env bash
# The device check: every test and benchmark tagged `gpu`, built here (a
# machine without a GPU) with --config=cuda, run on a GPU machine that
# builds nothing.
#
#   scripts/device_check.sh --package DIR     (here) build and package
#   scripts/device_check.sh --run DIR [OUT]   (GPU machine) run, results to OUT or $OUT
#
# --package finds the targets by tag (bazel query), builds them, and copies
# each one's runfiles into DIR/targets/, the shared libraries they load
# (Bazel's own and the system's, not glibc's, the NVIDIA driver's or the
# CUDA toolkit's, which the GPU machine has) into DIR/lib.tar.xz, and this script
# into DIR/; it fails when DIR would exceed 64 MiB (what may travel).
# --run runs every packaged test, then every benchmark, each under its own
# timeout within an 8-minute budget; writes each one's log and gtest XML to
# OUT/logs/ as it runs, and OUT/summary.txt and OUT/summary.json after each
# (so a run killed from outside still leaves what it did; "complete" says
# whether it finished); prints a line per entry as it ends, then the
# summary, and ends with one JSON line. A benchmark cut off keeps the
# figures it printed so far. Without a GPU the tests run anyway and skip: a
# dry run, with "gpu": null. docs/gpu.md ("The device check") says more.
#
# Environment: BAZEL (default bazel); DEVICE_CHECK_MAX_BYTES (64 MiB);
# DEVICE_CHECK_BUDGET_S (470), DEVICE_CHECK_TEST_TIMEOUT_S (150),
# DEVICE_CHECK_BENCH_TIMEOUT_S (240); for a short rerun inside what is
# left of a lease, DEVICE_CHECK_ONLY (comma-separated labels to run, e.g.
# //runtime/local:local_trainer_gpu_test) and DEVICE_CHECK_ARGS (a JSON
# object from a label to the extra arguments it gets, e.g.
# {"//bench/core_attention:core_attention_gpu_bench": ["--lengths=4096"]};
# GTEST_FILTER narrows the tests).
set -euo pipefail

usage() {
  echo "usage: $0 --package DIR | --run DIR [OUT]" >&2
  exit 2
}

die() {
  echo "device_check: $*" >&2
  exit 1
}

# Libraries the GPU machine brings itself: glibc's, the driver's, CUDA's.
is_machine_library() {
  case "$(basename "$1")" in
    linux-vdso.so* | ld-linux*.so* | libc.so* | libm.so* | libdl.so* | libpthread.so* | \
      librt.so* | libutil.so* | libresolv.so* | libnsl.so* | libanl.so*) return 0 ;;
    libcuda.so* | libnvidia-*.so* | libnvcuvid.so*) return 0 ;;
  esac
  case "$1" in
    /usr/local/cuda*) return 0 ;;
  esac
  return 1
}

is_elf() { [[ "$(head -c 4 "$1" | tr -d '\0')" == $'\x7fELF' ]]; }

# copy_libraries LABEL FILE LIBDIR: copies the shared libraries FILE (when
# it is an ELF program) loads, but the machine's own, into LIBDIR.
copy_libraries() {
  local label="$1" file="$2" libdir="$3" library
  is_elf "${file}" || return 0
  while read -r library; do
    [[ -z "${library}" ]] && continue
    if [[ "${library}" == "not found:"* ]]; then
      case "${library#not found: }" in
        libcuda.so* | libnvidia-*) continue ;;  # the driver's, on the GPU machine
      esac
      die "${label}: ${library#not found: } is not found here (ldd ${file})"
    fi
    is_machine_library "${library}" && continue
    cp -nL "${library}" "${libdir}/"
  done < <(ldd "${file}" | awk '/=> not found/ {print "not found: " $1; next}
                                /=>/ {print $3; next} /^\t\// {print $1}')
}

package() {
  local dir="$1"
  local root bazel workspace_name bin targets tests benchmarks
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  bazel="${BAZEL:-bazel}"
  cd "${root}"
  # Every test tagged gpu, and every binary tagged gpu (the benchmarks).
  tests="$(${bazel} query --noshow_progress 'attr(tags, "\bgpu\b", tests(//...))')"
  benchmarks="$(${bazel} query --noshow_progress \
    'attr(tags, "\bgpu\b", kind(".*_binary", //...))')"
  targets="$(printf '%s\n%s\n' "${tests}" "${benchmarks}" | sed '/^$/d')"
  rm -rf "${dir}"
  mkdir -p "${dir}/targets" "${dir}/lib"
  dir="$(cd "${dir}" && pwd)"
  : >"${dir}/manifest.tsv"
  cp "${root}/scripts/device_check.sh" "${dir}/device_check.sh"
  if [[ -z "${targets}" ]]; then
    echo "device_check: no target is tagged gpu; the package runs nothing"
    return 0
  fi
  # shellcheck disable=SC2086
  ${bazel} build --noshow_progress --config=cuda ${targets}
  bin="$(${bazel} info --config=cuda bazel-bin)"
  workspace_name="$(basename "$(${bazel} info --config=cuda execution_root)")"
  local label kind package_path name flat runfiles executable program
  while read -r label; do
    [[ -z "${label}" ]] && continue
    kind=benchmark
    if grep -qxF -- "${label}" <<<"${tests}"; then kind="test"; fi
    package_path="${label#//}"
    package_path="${package_path%%:*}"
    name="${label##*:}"
    flat="$(tr '/:' '__' <<<"${package_path}__${name}")"
    executable="${bin}/${package_path}/${name}"
    runfiles="${executable}.runfiles"
    [[ -x "${executable}" ]] || die "${label}: no executable at ${executable}"
    mkdir -p "${dir}/targets/${flat}"
    if [[ -d "${runfiles}" ]]; then
      # Dereferenced; Bazel's shared libraries go to lib/ once for all.
      tar -C "${runfiles}" --exclude='./*/_solib_*' -chf - . | tar -C "${dir}/targets/${flat}" -xf -
    fi
    mkdir -p "${dir}/targets/${flat}/${workspace_name}/${package_path}"
    cp -L "${executable}" "${dir}/targets/${flat}/${workspace_name}/${package_path}/${name}"
    # The libraries of the executable and of every program in its runfiles
    # (an end-to-end test's daemons).
    copy_libraries "${label}" "${executable}" "${dir}/lib"
    if [[ -d "${runfiles}" ]]; then
      while IFS= read -r -d '' program; do
        copy_libraries "${label}" "${program}" "${dir}/lib"
      done < <(find -L "${runfiles}" -path '*/_solib_*' -prune -o -type f -perm -u+x -print0)
    fi
    printf '%s\t%s\t%s\t%s\n' "${kind}" "${label}" "${flat}" \
      "${workspace_name}/${package_path}/${name}" >>"${dir}/manifest.tsv"
  done <<<"${targets}"
  # The shared libraries travel compressed (OpenBLAS alone is ~36 MB): --run
  # unpacks them.
  if [[ -n "$(ls -A "${dir}/lib")" ]]; then
    XZ_OPT="-6 -T2" tar -C "${dir}" -cJf "${dir}/lib.tar.xz" lib
  fi
  rm -rf "${dir}/lib"
  local bytes limit
  bytes="$(du -sb "${dir}" | cut -f1)"
  limit="${DEVICE_CHECK_MAX_BYTES:-$((64 * 1024 * 1024))}"
  if ((bytes > limit)); then
    echo "device_check: ${dir} holds ${bytes} bytes, more than ${limit} may travel; largest:" >&2
    du -ab "${dir}" | sort -rn | sed -n '2,11p' >&2
    exit 1
  fi
  echo "device_check: packaged $(grep -c . "${dir}/manifest.tsv") targets" \
    "($(grep -c '^test' "${dir}/manifest.tsv" || true) tests) into ${dir}: ${bytes} bytes"
}

run() {
  local dir out
  dir="$(cd "$1" && pwd)"
  out="${2:-${OUT:-}}"
  [[ -n "${out}" ]] || die "--run: give OUT or set \$OUT"
  [[ -f "${dir}/manifest.tsv" ]] || die "${dir} holds no manifest.tsv (make it with --package)"
  mkdir -p "${out}"
  out="$(cd "${out}" && pwd)"
  local python=python3
  command -v python3 >/dev/null || python=/usr/bin/python3
  DEVICE_CHECK_DIR="${dir}" DEVICE_CHECK_OUT="${out}" exec "${python}" -u - <<'PY'
import glob, json, os, re, shutil, subprocess, sys, tarfile, tempfile, time
import xml.etree.ElementTree as ET

dir_, out = os.environ["DEVICE_CHECK_DIR"], os.environ["DEVICE_CHECK_OUT"]
budget = float(os.environ.get("DEVICE_CHECK_BUDGET_S", "470"))
timeouts = {"test": float(os.environ.get("DEVICE_CHECK_TEST_TIMEOUT_S", "150")),
            "benchmark": float(os.environ.get("DEVICE_CHECK_BENCH_TIMEOUT_S", "240"))}
start = time.monotonic()
logs = os.path.join(out, "logs")  # beside the summary: back even from a run killed outside
os.makedirs(logs, exist_ok=True)
work = tempfile.mkdtemp(prefix="device_check.")  # the tests' TEST_TMPDIRs


def gpu_name():
    """The GPU's name as nvidia-smi reports it, or None (the dry run)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [l.strip() for l in done.stdout.splitlines() if l.strip()]
    return "; ".join(lines) if done.returncode == 0 and lines else None


def gtest_counts(xml_path):
    """(passed, failed, skipped) test cases of a gtest XML report, or None."""
    try:
        root = ET.parse(xml_path).getroot()
    except (OSError, ET.ParseError):
        return None
    passed = failed = skipped = 0
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("result") == "skipped" or case.find("skipped") is not None or \
                case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def last_json_object(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def refuse(message):
    """Ends a run that cannot start, still with its JSON line and summary."""
    print("device_check: " + message, file=sys.stderr)
    result = {"error": message, "complete": False}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    print(json.dumps(result, sort_keys=True))
    sys.exit(2)


def kill_strays(tmp):
    """SIGKILLs what an entry left running (daemons in their own sessions,
    which killpg misses), found by the TEST_TMPDIR it gave them; how many."""
    marker = ("TEST_TMPDIR=" + tmp).encode()
    killed = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker not in f.read().split(b"\0"):
                    continue
            os.kill(int(pid), 9)
            killed += 1
        except OSError:
            continue
    return killed


gpu = gpu_name()
entries = []
with open(os.path.join(dir_, "manifest.tsv")) as f:
    for line in f:
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 4:
            entries.append(dict(zip(("kind", "label", "flat", "exe"), parts)))
# Tests first, by label: that is layer order here (runtime/device, kernels,
# model, train, then worker), so a kernel's failure shows before what it
# breaks above it and the quick kernel tests run early in the budget; then
# the benchmarks.
entries.sort(key=lambda e: (e["kind"] != "test", e["label"]))
only = [label for label in os.environ.get("DEVICE_CHECK_ONLY", "").split(",") if label]
unknown = [label for label in only if label not in {e["label"] for e in entries}]
if unknown:
    refuse("DEVICE_CHECK_ONLY names what is not packaged: " + ", ".join(unknown))
if only:
    entries = [e for e in entries if e["label"] in only]
try:
    extra_args = json.loads(os.environ.get("DEVICE_CHECK_ARGS") or "{}")
except ValueError as error:
    refuse(f"DEVICE_CHECK_ARGS is not JSON: {error}")
if not isinstance(extra_args, dict) or not all(
        isinstance(v, list) and all(isinstance(a, str) for a in v) for v in extra_args.values()):
    refuse("DEVICE_CHECK_ARGS must map labels to lists of strings")

env_base = dict(os.environ)
lib_dir = os.path.join(dir_, "lib")
packed_libs = os.path.join(dir_, "lib.tar.xz")
if os.path.exists(packed_libs):
    lib_dir = os.path.join(tempfile.mkdtemp(prefix="device_check_lib_"), "lib")
    with tarfile.open(packed_libs) as packed:
        packed.extractall(os.path.dirname(lib_dir))
library_path = [lib_dir, "/usr/local/cuda/lib64",
                "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/nvidia/lib64"]
# After the toolkit's own: the NVIDIA Python packages' libraries, where a
# machine whose toolkit has no NCCL keeps it (nvidia/nccl/lib, nvidia/cu13/lib).
for pattern in ("/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib",
                "/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
                "/usr/lib/python3/dist-packages/nvidia/*/lib"):
    library_path.extend(sorted(glob.glob(pattern)))
if env_base.get("LD_LIBRARY_PATH"):
    library_path.append(env_base["LD_LIBRARY_PATH"])
env_base["LD_LIBRARY_PATH"] = ":".join(library_path)

totals = {"tests_passed": 0, "tests_failed": 0, "tests_skipped": 0, "tests_timed_out": 0,
          "binaries_not_run": 0, "benchmarks_run": 0, "benchmarks_failed": 0}
figures = {}
rows = []


def write_summary(complete):
    summary = [f"device check on {gpu or 'no GPU (dry run: device tests skip)'}"]
    for verdict, label, detail in rows:
        summary.append(f"{verdict:8} {label}  {detail}")
    summary.append(", ".join(f"{k.replace('_', ' ')} {v}" for k, v in totals.items()))
    result = dict(totals, gpu=gpu, seconds=round(time.monotonic() - start, 1), figures=figures,
                  complete=complete)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(summary) + "\n")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    return summary, result


def add_row(verdict, label, detail):
    rows.append((verdict, label, detail))
    print(f"{verdict:8} {label}  {detail}", flush=True)
    write_summary(complete=False)


for e in entries:
    remaining = budget - (time.monotonic() - start)
    name = e["flat"]
    log_path = os.path.join(logs, name + ".log")
    xml_path = os.path.join(logs, name + ".xml")
    if remaining < 5:
        totals["binaries_not_run"] += 1
        add_row("NOT RUN", e["label"], "no time left in the budget")
        continue
    runfiles = os.path.join(dir_, "targets", name)
    workspace = e["exe"].split("/", 1)[0]
    tmp = tempfile.mkdtemp(prefix=name + ".", dir=work)
    env = dict(env_base, TEST_SRCDIR=runfiles, RUNFILES_DIR=runfiles, TEST_WORKSPACE=workspace,
               TEST_TMPDIR=tmp, XML_OUTPUT_FILE=xml_path, DEVICE_CHECK_GPU=gpu or "")
    argv = [os.path.join(runfiles, e["exe"])] + extra_args.get(e["label"], [])
    if e["kind"] == "test":
        argv.append("--gtest_output=xml:" + xml_path)
    limit = min(timeouts[e["kind"]], remaining)
    began = time.monotonic()
    timed_out = False
    with open(log_path, "wb") as log:
        try:
            process = subprocess.Popen(argv, cwd=os.path.join(runfiles, workspace), env=env,
                                       stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                code = process.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(process.pid, 9)
                try:
                    code = process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    # Stuck in the driver: leave it, the run goes on.
                    log.write(b"device_check: still there 30 s after SIGKILL\n")
                    code = -9
        except OSError as error:
            log.write(f"cannot start {argv[0]}: {error}\n".encode())
            code = 127
    strays = kill_strays(tmp)
    seconds = time.monotonic() - began
    with open(log_path, errors="replace") as log:
        text = log.read()
    if e["kind"] == "test":
        counts = gtest_counts(xml_path)
        if timed_out:
            totals["tests_timed_out"] += 1
            verdict = "TIMEOUT"
        elif counts is None:
            # Not a gtest binary (or it died before writing its report): one test.
            counts = (1, 0, 0) if code == 0 else (0, 1, 0)
        if not timed_out:
            if code != 0 and counts[1] == 0:
                counts = (counts[0], 1, counts[2])  # crashed after its report
            totals["tests_passed"] += counts[0]
            totals["tests_failed"] += counts[1]
            totals["tests_skipped"] += counts[2]
            verdict = "FAIL" if counts[1] else ("SKIP" if counts[0] == 0 else "PASS")
            detail = f"{counts[0]} passed, {counts[1]} failed, {counts[2]} skipped"
        else:
            detail = f"killed after {limit:.0f} s"
    else:
        # The benchmarks print their figures so far after each measurement:
        # a cut-off one keeps what it measured.
        found = last_json_object(text)
        if timed_out or code != 0:
            totals["benchmarks_failed"] += 1
            verdict = "TIMEOUT" if timed_out else "FAIL"
            detail = f"killed after {limit:.0f} s" if timed_out else f"exit {code}"
            if found is not None:
                figures[e["label"].split(":")[-1]] = dict(found, cut_off=verdict)
                detail += "; figures so far: " + json.dumps(found)
        else:
            totals["benchmarks_run"] += 1
            verdict = "RAN"
            if found is not None:
                figures[e["label"].split(":")[-1]] = found
            detail = "figures: " + (json.dumps(found) if found is not None else "none printed")
    if strays:
        detail += f"; killed {strays} process(es) it left running"
    add_row(verdict, e["label"], f"{detail} ({seconds:.1f} s)")

summary, result = write_summary(complete=True)
shutil.rmtree(work, ignore_errors=True)
print("\n".join(summary))
print(json.dumps(result, sort_keys=True))
bad = totals["tests_failed"] + totals["tests_timed_out"] + totals["benchmarks_failed"] + \
    totals["binaries_not_run"]
sys.exit(1 if bad else 0)
PY
}

[[ $# -ge 2 ]] || usage
case "$1" in
  --package)
    [[ $# -eq 2 ]] || usage
    package "$2"
    ;;
  --run)
    [[ $# -le 3 ]] || usage
    run "$2" "${3:-}"
    ;;
  *) usage ;;
esac
