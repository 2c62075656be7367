#!/bin/bash
# End-to-end check of the `corescape` binary: exit codes, error lines, and a
# real local cluster (cluster up / nodes / status / drain / cluster down).
set -u

CLI="${TEST_SRCDIR}/${TEST_WORKSPACE}/client/corescape"
VERSION="$(tr -d '[:space:]' < "${TEST_SRCDIR}/${TEST_WORKSPACE}/VERSION")"
export CORESCAPE_HOME="${TEST_TMPDIR}/home"
unset CORESCAPE_SCHEDULER CORESCAPE_BIN_DIR
OUT="${TEST_TMPDIR}/stdout"
ERR="${TEST_TMPDIR}/stderr"
PYTHON=/usr/bin/python3

cleanup() { "${CLI}" cluster down --timeout 5 >/dev/null 2>&1; }
trap cleanup EXIT

source "${TEST_SRCDIR}/${TEST_WORKSPACE}/client/cli/cli_test_lib.sh"

# --- Without a scheduler --------------------------------------------------
run 0 version;          stdout_has "^corescape ${VERSION}\$"
run 0 version --json;   stdout_has "\"version\": \"${VERSION}\""
run 0 --version;        stdout_has "${VERSION}"
for command in "" "nodes" "status" "drain" "cluster" "cluster up" "cluster down"; do
  run 0 ${command} --help; stdout_has "Usage: corescape"
done
run 0 nodes --help;     stdout_has "--scheduler"; stdout_has "--json"; stdout_has "--role"

run 2;                  stderr_has "^corescape: error: missing command"
run 2 bogus;            stderr_has "^corescape: error: .*bogus"
run 2 nodes --role x;   stderr_has "^corescape: error: --role"
run 2 drain;            stderr_has "^corescape: error: NODE is required"
run 2 cluster;          stderr_has "one of: up, down, status"
run 2 nodes --rpc-timeout -1; stderr_has "positive number of seconds"
run 2 nodes;            stderr_has "pass --scheduler"; stderr_has "cluster up"
run 2 nodes --scheduler nonsense; stderr_has "expected HOST:PORT"

# Port 1 on loopback refuses connections: unreachable, at once, one line.
start=${SECONDS}
run 3 nodes --scheduler 127.0.0.1:1 --insecure
stderr_has "^corescape: error: scheduler at 127.0.0.1:1 is unreachable"
stderr_one_error_line
[[ $((SECONDS - start)) -le 5 ]] || fail "unreachable scheduler took too long"
CORESCAPE_SCHEDULER=127.0.0.1:1 run 3 status --insecure
stderr_has "CORESCAPE_SCHEDULER"
# Another scheduler than the local cluster's: no certificates known, no plaintext assumed.
CORESCAPE_SCHEDULER=127.0.0.1:1 run 2 status; stderr_has "pass --tls-dir DIR"

# Certificates.
run 0 certs init "${CORESCAPE_HOME}/certs" --node w-0
stdout_has "^made the cluster CA "; stdout_has "node-w-0.crt$"
[[ "$(stat -c %a "${CORESCAPE_HOME}/certs/node-w-0.key")" == 600 ]] || fail "key not 0600"
run 0 certs init "${CORESCAPE_HOME}/certs" --node w-0 --node w-1
stdout_has "^signed with the existing CA "; stdout_has "^made .*node-w-1.crt$"; stdout_has "^kept .*node-w-0.crt$"
run 5 certs init "${CORESCAPE_HOME}/certs" --node "../x"; stderr_has "--node"

# Job commands: local checks happen before the scheduler is asked.
EXAMPLES="${TEST_SRCDIR}/${TEST_WORKSPACE}/examples"
for command in submit jobs job watch cancel plot; do
  run 0 ${command} --help; stdout_has "Usage: corescape ${command}"
done
run 2 submit;           stderr_has "^corescape: error: give a job file"
run 2 submit /nonexistent/job.json
stderr_has "^corescape: error: job file '/nonexistent/job.json' does not exist$"
run 2 submit --optimizer sgd; stderr_has "--optimizer"
run 2 watch;            stderr_has "JOB is required"
run 2 plan;             stderr_has "JOB is required"
run 2 plot j-1 --scheduler 127.0.0.1:1; stderr_has "--csv"
for example in "${EXAMPLES}"/*.json "${EXAMPLES}"/*.yaml; do
  # Parses, then finds no scheduler.
  run 3 submit "${example}" --scheduler 127.0.0.1:1 --insecure; stderr_one_error_line
done
for command in "jobs" "job j-1" "watch j-1" "cancel j-1" "plan j-1" "rebalance"; do
  run 3 ${command} --scheduler 127.0.0.1:1 --insecure
  stderr_has "^corescape: error: scheduler at 127.0.0.1:1 is unreachable"
  stderr_one_error_line
done

run 0 cluster down;     stdout_has "no local cluster running"
run 0 cluster status;   stdout_has "no local cluster running"

# --- A local cluster ------------------------------------------------------
run 0 cluster up --workers 2 --attention-servers 1 --timeout 60
stdout_has "^cluster up: scheduler 127\.0\.0\.1:[0-9]+, 2 workers, 1 attention server"
stdout_has "^mutual TLS: certificates in ${CORESCAPE_HOME}/cluster/tls "
ADDRESS="$(tail -n 1 "${OUT}")"
[[ "${ADDRESS}" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "last line '${ADDRESS}' is not HOST:PORT"
[[ -f "${CORESCAPE_HOME}/cluster.json" ]] || fail "no cluster file"
PIDS="$(${PYTHON} -c 'import json,sys; print(" ".join(str(d["pid"]) for d in json.load(open(sys.argv[1]))["daemons"]))' "${CORESCAPE_HOME}/cluster.json")"
[[ "$(echo ${PIDS} | wc -w)" -eq 4 ]] || fail "cluster file lists '${PIDS}', want 4 daemons"

run 1 cluster up;       stderr_has "already running"; stderr_has "cluster down"

run 0 nodes
stdout_has "^NAME +ROLE +STATE +INCARNATION +HOST +PID +ADDRESS +LAST-HEARTBEAT +DEVICE$"
stdout_has "^worker-0 +WORKER +ALIVE "
stdout_has "^worker-1 +WORKER +ALIVE "
stdout_has "^attn-0 +ATTENTION_SERVER +ALIVE "
stdout_has " ago +cpu$"
stdout_has " ago +-$"

run 0 nodes --json
${PYTHON} - "${OUT}" <<'PY' || fail "nodes --json is not as documented"
import json, sys
nodes = json.load(open(sys.argv[1]))
assert isinstance(nodes, list) and len(nodes) == 3, nodes
required = {"name", "node_id", "role", "state", "incarnation", "host", "pid",
            "grpc_address", "data_address", "last_heartbeat",
            "last_heartbeat_unix_ms", "lease_expires_unix_ms", "resources",
            "current_job_id"}
for node in nodes:
    assert required <= node.keys(), required - node.keys()
    assert node["state"] == "ALIVE", node
    assert isinstance(node["pid"], int) and isinstance(node["incarnation"], int)
    assert node["last_heartbeat"].endswith("Z") and "." in node["last_heartbeat"]
    assert {"cpu_cores", "memory_bytes", "gpus"} <= node["resources"].keys()
assert sorted(n["role"] for n in nodes) == ["ATTENTION_SERVER", "WORKER", "WORKER"]
PY
run 0 nodes --role attention-server --json
[[ "$(grep -c '"name"' "${OUT}")" -eq 1 ]] || fail "--role filter"

run 0 status
stdout_has "2 workers alive, 1 attention server alive, 0 dead, 0 draining"
stdout_has "NODE_REGISTERED"
run 0 status --json --scheduler "${ADDRESS}"
stdout_has "\"workers_alive\": 2"

run 0 drain worker-0 --reason "smoke test"
stdout_has "^node worker-0 is now DRAINING$"
run 0 nodes --state draining
stdout_has "^worker-0 +WORKER +DRAINING "
run 4 drain nosuch;     stderr_has "^corescape: error: no node named 'nosuch'$"
# TLS by default: a submitter's certificate may not drain; plaintext cannot connect.
run 1 drain worker-1 --identity submitter; stderr_has "PERMISSION_DENIED: draining a node needs the operator role"
run 3 nodes --insecure
run 5 drain 'bad name!'; stderr_one_error_line

# Jobs: an empty list, an unknown job, a spec the scheduler rejects.
run 0 jobs;             stdout_has "^no jobs on the scheduler at "
run 0 jobs --json;      stdout_has "^\[\]$"
run 4 job j-nosuch;     stderr_has "^corescape: error: no job with id 'j-nosuch'$"
run 5 submit --name bad --steps 1 --train-data /nonexistent/shards
stderr_has "^corescape: error: .*train_shards"; stderr_one_error_line

# Attention plans: none yet anywhere.
run 4 plan j-nosuch;    stderr_has "^corescape: error: no job with id 'j-nosuch'$"
run 4 rebalance j-nosuch; stderr_has "^corescape: error: no job with id 'j-nosuch'$"
run 0 rebalance;        stdout_has "^no running DISAGGREGATED job"
run 0 rebalance --json; stdout_has "^\[\]$"

run 0 cluster down
stdout_has "^stopped worker-0 "
stdout_has "^stopped scheduler "
stdout_has "^cluster down: stopped 4 of 4 daemons"
[[ ! -e "${CORESCAPE_HOME}/cluster.json" ]] || fail "cluster file left behind"
for pid in ${PIDS}; do
  state="$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null)"
  [[ -z "${state}" || "${state}" == "Z" ]] || fail "daemon ${pid} still running"
done
run 2 nodes;            stderr_has "cluster up"
run 0 cluster down;     stdout_has "no local cluster running"

echo "PASS"
