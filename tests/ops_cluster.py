"""A local cluster for the operations tests: started with `corescape cluster
up` (every daemon's metrics on a free loopback port, the scheduler's status
page on another), running a DISAGGREGATED training job.

Runs under /usr/bin/python3 (Debian's, which has grpcio and protobuf)."""

import json
import os
import shutil
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

import grpc

import cluster_harness as harness
from corescape.v1 import job_pb2
from jobs_e2e_test import Jobs, spec


def require(path, package):
    """Fails (never skips) when a tool the test drives is missing."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise AssertionError(f"{path} is missing: install Debian's `{package}` package "
                             f"(scripts/setup.sh)")
    return path


def http(method, url, body=None, timeout=10):
    """(status, body) of one request; HTTP errors are answers too."""
    request = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def get_json(url):
    status, body = http("GET", url)
    if status != 200:
        raise AssertionError(f"GET {url}: {status} {body}")
    return json.loads(body)


class OpsCluster:
    """`corescape cluster up` in a home of its own; `down` stops it."""

    def __init__(self, name):
        self.home = os.path.join(harness.TMP, f"{name}-home")
        shutil.rmtree(self.home, ignore_errors=True)
        os.makedirs(self.home)
        self.env = {k: v for k, v in os.environ.items() if k != "CORESCAPE_SCHEDULER"}
        self.env["CORESCAPE_HOME"] = self.home
        self.daemons = {}
        self.jobs = None

    def corescape(self, *args, timeout=120):
        result = subprocess.run([harness.CLI, *args], capture_output=True, text=True,
                                env=self.env, timeout=timeout)
        if result.returncode != 0:
            raise AssertionError(f"corescape {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result.stdout

    def up(self, workers=2, attention_servers=1):
        # The tests' checkpoint directories and datasets are under TMP.
        self.corescape("cluster", "up", "--workers", str(workers), "--attention-servers",
                       str(attention_servers), "--lease-ttl", "4",
                       "--checkpoint-root", harness.TMP, "--data-root", harness.TMP)
        status = json.loads(self.corescape("cluster", "status", "--json"))
        self.daemons = {d["name"]: d for d in status["daemons"]}
        self.scheduler_address = status["scheduler"]
        self.status_url = self.daemons["scheduler"]["status_url"]
        # `cluster up` made certificates and runs mutual TLS.
        self.tls_dir = status["tls_dir"]
        self.jobs = Jobs(grpc.secure_channel(
            self.scheduler_address, harness.tls_credentials(self.tls_dir, "operator")))
        return self.daemons

    def metrics_address(self, name):
        url = self.daemons[name]["metrics_url"]
        assert url.startswith("http://") and url.endswith("/metrics"), url
        return url[len("http://"):-len("/metrics")]

    def submit_disaggregated(self, name, steps, scape_density=0, checkpoint_dir=""):
        """A 2-worker job whose core attention runs on the attention server,
        validated every 5 steps: long enough to be watched while it runs.
        With scape_density it trains with SCAPE at that density; with
        checkpoint_dir it checkpoints there every 5 steps."""
        s = spec(name, steps=steps, eval_interval=5, checkpoint_dir=checkpoint_dir,
                 checkpoint_interval=5 if checkpoint_dir else 0)
        if scape_density:
            s.optimizer.name = "scape"
            s.optimizer.scape.density = scape_density
        s.placement.workers = 2
        s.attention.mode = job_pb2.DISAGGREGATED
        s.attention.attention_servers = 1
        return self.jobs.run(s)

    def wait_for_step(self, job_id, step, timeout=120):
        return harness.wait_for(
            lambda: (lambda j: j if j.state == job_pb2.RUNNING and j.progress.step >= step
                     else None)(self.jobs.job(job_id)),
            timeout, f"{job_id} at step {step}", interval=0.1)

    def cancel(self, job_id):
        self.jobs.cancel(job_pb2.CancelJobRequest(job_id=job_id, reason="test done"), timeout=5)
        return self.jobs.wait_state(job_id, (job_pb2.CANCELLED, job_pb2.SUCCEEDED,
                                             job_pb2.FAILED), timeout=60)

    def down(self):
        if self.jobs is not None:
            self.jobs.channel.close()
        subprocess.run([harness.CLI, "cluster", "down"], capture_output=True, env=self.env,
                       timeout=60)

    def dump_logs(self):
        for daemon in self.daemons.values():
            try:
                with open(daemon["log"], errors="replace") as f:
                    print(f"===== {daemon['name']} =====\n{f.read()[-20000:]}", file=sys.stderr)
            except OSError:
                pass


class OpsClusterTestCase(unittest.TestCase):
    """A cluster of its own per test, stopped afterwards; the daemons' logs
    (and `extra_logs()`) printed when the test fails."""

    def setUp(self):
        self.cluster = OpsCluster(self.id().split(".")[-1])

    def tearDown(self):
        self.cluster.down()

    def extra_logs(self):
        return ""

    def run(self, result=None):
        result = super().run(result)
        if result and (result.failures or result.errors):
            self.cluster.dump_logs()
            print(self.extra_logs(), file=sys.stderr)
        return result
