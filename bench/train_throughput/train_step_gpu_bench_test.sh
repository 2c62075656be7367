#!/usr/bin/env bash
# The GPU training-step benchmark rehearsed on the CPU backend's device
# path (--device=cpu): every form it times runs, each measurement is
# followed by a JSON line of the figures so far (the last one complete),
# and bad arguments are refused naming the flag.
set -euo pipefail

BIN="${TEST_SRCDIR}/${TEST_WORKSPACE}/bench/train_throughput/train_step_gpu_bench"
OUT="${TEST_TMPDIR}/out.txt"
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/bench/bench_test_lib.sh"

"${BIN}" --device=cpu --precision=fp32 --threads=1 --configs=tiny:2x32 --steps=1 \
  --warmup_steps=1 --scape_densities=0.1 --profile_ops=false >"${OUT}"

/usr/bin/python3 - "${OUT}" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
figures = [json.loads(l) for l in lines]
# AdamW's step, then each of the four SCAPE forms and topk-adamw, then the
# whole: one line each.
assert len(figures) == 7, f"{len(figures)} JSON lines, expected 7"
first, last = figures[0]["tiny"], figures[-1]["tiny"]
assert first["finished"] is False and first["scape_on_device"] == {}, first
assert last["finished"] is True, last
for form in ("scape_on_device", "scape_offloaded", "scape_reference_on_device",
             "scape_reference_offloaded", "topk_adamw_on_device"):
    entry = last[form]["0.1"]
    assert entry["step_ms"] > 0 and 0 <= entry["own_work_share"] < 1, (form, entry)
assert last["step_ms"] > 0 and last["host_optimizer_step_ms"] > 0, last
# A CPU has no known peak: MFU is measured against none.
assert figures[-1]["gpu"] == "" and figures[-1]["peak_tflops"] == 0, figures[-1]
PY

# A peak given is the one MFU is measured against.
"${BIN}" --device=cpu --precision=fp32 --threads=1 --configs=tiny:2x32 --steps=1 \
  --warmup_steps=1 --scape_densities=0.1 --profile_ops=false --host_optimizer_baseline=false \
  --offload_residuals=false --peak_tflops=0.5 >"${OUT}"
/usr/bin/python3 - "${OUT}" <<'PY'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
assert last["peak_tflops"] == 0.5, last
tiny = last["tiny"]
assert tiny["model_tflops_per_second"] > 0, tiny
assert abs(tiny["mfu"] - tiny["model_tflops_per_second"] / 0.5) < 2e-4, tiny
PY

expect_refused "--precision=fp32" "bf16 on the CPU" "${BIN}" --device=cpu --configs=tiny:2x32
expect_refused "--device" "--device=tpu:0" "${BIN}" --device=tpu:0
expect_refused "--peak_tflops" "--peak_tflops=-1" "${BIN}" --device=cpu --precision=fp32 --peak_tflops=-1
echo PASS
