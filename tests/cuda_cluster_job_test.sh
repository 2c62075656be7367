#!/bin/bash
# A CUDA job from the CLI, end to end, on a local cluster of real daemons:
# `corescape cluster up --worker-devices`, `corescape submit --device cuda`.
#
# Everywhere: --worker-devices mistakes are usage errors; a CPU cluster
# keeps a CUDA job PENDING with a reason naming the missing GPU; the same
# small job trains on the CPU, its loss falls and `job` shows its model
# FLOP rate (no MFU: a CPU has no known peak).
# Without a usable GPU (CI): a worker asked to serve cuda:0 refuses to
# start, and `cluster up` fails with its reason and leaves nothing running.
# With one (the device check, scripts/device_check.sh): a worker serving
# cuda:0 trains the job on the GPU (AdamW, then SCAPE, then topk-adamw,
# each with its state on the GPU) to a loss close to the CPU run's, an
# H100/H200/A100 shows its MFU, and `nodes`/`jobs` show the GPU.
set -u

CLI="${TEST_SRCDIR}/${TEST_WORKSPACE}/client/corescape"
export CORESCAPE_HOME="${TEST_TMPDIR}/home"
unset CORESCAPE_SCHEDULER CORESCAPE_BIN_DIR CORESCAPE_TLS_DIR
OUT="${TEST_TMPDIR}/stdout"
ERR="${TEST_TMPDIR}/stderr"
WORK="${TEST_TMPDIR}/work"
mkdir -p "${WORK}"
cd "${WORK}" || exit 1

cleanup() { "${CLI}" cluster down --timeout 5 >/dev/null 2>&1; }
trap cleanup EXIT

source "${TEST_SRCDIR}/${TEST_WORKSPACE}/client/cli/cli_test_lib.sh"

gpu=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU 0:'; then
  gpu="$(nvidia-smi -L | sed -n 's/^GPU 0: \(.*\) (UUID.*/\1/p')"
  echo "GPU 0: ${gpu}"
else
  echo "no GPU here: checking the refusals and the CPU run only"
fi

# A corpus of short documents that a small model learns quickly.
awk 'BEGIN {
  srand(7)
  split("cat dog bird fish horse mouse", animal, " ")
  split("red green blue yellow black white", colour, " ")
  split("sat ran slept jumped sang waited", verb, " ")
  for (doc = 0; doc < 4000; ++doc) {
    n = 1 + int(rand() * 4)
    for (s = 0; s < n; ++s) {
      printf "the %s %s %s on the mat number %d. ", colour[1 + int(rand() * 6)],
             animal[1 + int(rand() * 6)], verb[1 + int(rand() * 6)], int(rand() * 10)
    }
    printf "\n%%\n"
  }
}' >corpus.txt
run 0 data prepare --input="${WORK}/corpus.txt" --delimiter=% --output="${WORK}/data"

# submit_job NAME ARGS...: submits a 60-step job of `tiny` on the corpus,
# follows it to the end (`watch` exits 0 only when it SUCCEEDED) and sets
# JOB to its id.
submit_job() {
  local name="$1"; shift
  run 0 submit --name "${name}" --model tiny --train-data "${WORK}/data" --steps 60 \
    --seq-len 128 --micro-batch 8 --lr 0.003 --seed 3 --workers 1 "$@"
  JOB="$(tail -n 1 "${OUT}")"
  [[ -n "${JOB}" ]] || fail "submit printed no job id"
  run 0 watch "${JOB}"
  run 0 job "${JOB}" --json
  grep -q '"state": "SUCCEEDED"' "${OUT}" || fail "${name} did not end SUCCEEDED"
}
# first_and_last_loss JOB: "FIRST LAST" training loss of the job's curve.
first_and_last_loss() {
  run 0 plot "$1" --csv "${WORK}/$1.csv"
  awk -F, 'NR > 1 && $2 != "" { if (first == "") first = $2; last = $2 }
           END { print first, last }' "${WORK}/$1.csv"
}
# descends JOB: the loss after 60 steps is at most 0.7 of the first step's.
descends() {
  local first last
  read -r first last <<<"$(first_and_last_loss "$1")"
  [[ -n "${first}" && -n "${last}" ]] || fail "$1: no loss curve"
  echo "$1: loss ${first} -> ${last}"
  awk -v f="${first}" -v l="${last}" 'BEGIN { exit !(l <= 0.7 * f) }' ||
    fail "$1: loss ${first} -> ${last} did not fall to 0.7 of the first step's"
  LAST_LOSS="${last}"
}

# --- Usage errors: before anything starts ----------------------------------
run 2 cluster up --workers 2 --worker-devices cuda:0
stderr_has "^corescape: error: --worker-devices: 1 devices for 2 workers"
run 2 cluster up --workers 2 --worker-devices cuda:0,cuda:0
stderr_has "cuda:0 is given to worker-0 and worker-1 \(one worker daemon per GPU\)"
run 2 cluster up --workers 1 --worker-devices tpu:0
stderr_has "^corescape: error: --worker-devices: worker-0: "
run 2 submit --name x --train-data "${WORK}/data" --device gpu
stderr_has "^corescape: error: --device: unknown device 'gpu' \(cpu, cuda\)"
run 0 cluster status; stdout_has "no local cluster running"

# --- A CPU cluster: the CUDA job waits, the CPU job trains -----------------
run 0 cluster up --workers 1 --attention-servers 0 --timeout 60
run 0 nodes; stdout_has "^worker-0 +WORKER +ALIVE .* cpu$"
run 0 submit --name waits-for-a-gpu --model tiny --train-data "${WORK}/data" --steps 5 \
  --workers 1 --device cuda
WAITING="$(tail -n 1 "${OUT}")"
for _ in $(seq 50); do
  run 0 job "${WAITING}" --json
  grep -q "with a CUDA GPU" "${OUT}" && break
  sleep 0.2
done
grep -q '"state": "PENDING"' "${OUT}" || fail "the CUDA job is not PENDING"
stdout_has "waiting for 1 healthy free workers? with a CUDA GPU \(device: cuda; 0 free now\); 0 of 1 registered workers serve one"
run 0 cancel "${WAITING}"
submit_job on-the-cpu --device cpu --optimizer adamw
descends "${JOB}"
CPU_LOSS="${LAST_LOSS}"
# Its model FLOP rate; a CPU has no known peak, so no MFU.
run 0 job "${JOB}"
stdout_has "^Compute: +[0-9.e+-]+ TFLOP/s per worker \(MFU unknown: no peak for this device\)$"
run 0 cluster down

# --- A worker serving cuda:0 ----------------------------------------------
if [[ -z "${gpu}" ]]; then
  run 1 cluster up --workers 1 --attention-servers 0 --worker-devices cuda:0 --timeout 60
  # The worker's own reason: built without CUDA, or no such GPU.
  stderr_has "worker-0"
  stderr_has "--device=cuda:0: (this worker was built without CUDA|no such GPU|.*GPU)"
  run 0 cluster status; stdout_has "no local cluster running"
  echo "PASS (no GPU: refusals and the CPU run)"
  exit 0
fi

run 0 cluster up --workers 1 --attention-servers 0 --worker-devices cuda:0 --timeout 120
stdout_has "^GPUs: worker-0 on cuda:0$"
run 0 nodes; stdout_has "^worker-0 +WORKER +ALIVE .* cuda:0 \("
submit_job on-the-gpu --device cuda --optimizer adamw
run 0 jobs; stdout_has "on-the-gpu .*cuda"
descends "${JOB}"
# bf16 on the GPU, fp32 on the CPU, same data and seed: close at the end.
awk -v g="${LAST_LOSS}" -v c="${CPU_LOSS}" 'BEGIN { d = g - c; if (d < 0) d = -d; exit !(d <= 0.1 * c) }' ||
  fail "GPU loss ${LAST_LOSS} is not within 10% of the CPU run's ${CPU_LOSS}"
# A GPU whose dense peak the worker knows gives the job an MFU.
if [[ "${gpu}" =~ (H100|H200|A100) ]]; then
  run 0 job "${JOB}"; stdout_has "^Compute: +[0-9.e+-]+ TFLOP/s per worker, MFU [0-9.]+%$"
fi
submit_job scape-on-the-gpu --device cuda --optimizer scape --density 0.1
descends "${JOB}"
submit_job topk-on-the-gpu --device cuda --optimizer topk-adamw --density 0.1
descends "${JOB}"
# Every optimizer kept its state on the GPU (not the host fallback).
WORKER_LOG="${CORESCAPE_HOME}/cluster/logs/worker-0.log"
for optimizer in adamw scape topk-adamw; do
  grep -q "optimizer ${optimizer}: state on cuda:0 beside the parameters" "${WORKER_LOG}" ||
    { grep "optimizer " "${WORKER_LOG}" >&2; fail "${optimizer}'s state is not on cuda:0"; }
done
run 0 cluster down
echo "PASS (${gpu}: AdamW, SCAPE and topk-adamw trained on cuda:0)"
