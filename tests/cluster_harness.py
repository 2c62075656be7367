"""Starts real corescape daemons on loopback for multi-process tests.

Runs under /usr/bin/python3 (Debian's, which has grpcio and protobuf).
Everything here is plain processes, files and sockets: no mocks.
"""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."),
                        os.environ.get("TEST_WORKSPACE", "corescape"))
# Generated message modules: corescape/v1/*_pb2.py, grpc_health_v1/health_pb2.py.
sys.path.insert(0, os.path.join(RUNFILES, "proto"))
sys.path.insert(0, os.path.join(RUNFILES, "tests", "proto"))

SCHEDULER = os.path.join(RUNFILES, "scheduler", "corescape-scheduler")
WORKER = os.path.join(RUNFILES, "worker", "corescape-worker")
ATTENTION_SERVER = os.path.join(RUNFILES, "attention_server",
                                "corescape-attention-server")
CLI = os.path.join(RUNFILES, "client", "corescape")

TMP = os.environ.get("TEST_TMPDIR", "/tmp")


def wait_for(predicate, timeout, what, interval=0.05):
    """Polls predicate() until it returns a truthy value; fails after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Daemon:
    """One daemon process with its log file and port file."""

    def __init__(self, name, argv, workdir):
        self.name = name
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.port_file = os.path.join(workdir, f"{name}.addr")
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        self.argv = argv + [f"--port_file={self.port_file}"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=log,
                                            stdin=subprocess.DEVNULL)

    def address(self, timeout=15):
        def read():
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.process.returncode}:\n"
                                     + self.log())
            if os.path.exists(self.port_file):
                with open(self.port_file) as f:
                    return f.read().strip()
            return None
        return wait_for(read, timeout, f"{self.name} to serve")

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def kill(self, sig=signal.SIGKILL):
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def wait(self, timeout=15):
        return self.process.wait(timeout=timeout)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def register_request(name):
    """A RegisterRequest that passes validation, for a worker named `name`."""
    from corescape.v1 import common_pb2, node_pb2
    request = node_pb2.RegisterRequest(
        name=name, role=common_pb2.WORKER, host="127.0.0.1", pid=4242,
        grpc_address="127.0.0.1:7071", instance_id=7)
    request.resources.cpu_cores = 2
    return request


def free_port():
    """A loopback TCP port free right now (for daemons that need a fixed one)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certificates(tls_dir, *nodes):
    """`corescape certs init tls_dir --node ...` (reruns add nodes, keep the CA)."""
    args = [CLI, "certs", "init", tls_dir]
    for node in nodes:
        args += ["--node", node]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"certs init exited {result.returncode}:\n{result.stderr}")


def tls_credentials(tls_dir, stem):
    """grpcio channel credentials presenting tls_dir/<stem>.crt, trusting ca.crt."""
    import grpc

    def read(name):
        with open(os.path.join(tls_dir, name), "rb") as f:
            return f.read()
    return grpc.ssl_channel_credentials(root_certificates=read("ca.crt"),
                                        private_key=read(f"{stem}.key"),
                                        certificate_chain=read(f"{stem}.crt"))


class Cluster:
    """A scheduler plus nodes, each a real process on loopback, with mutual
    TLS from certificates in <workdir>/tls (tls=False: --insecure)."""

    def __init__(self, workdir, lease_ttl="2s", tls=True):
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.state_dir = os.path.join(workdir, "scheduler-state")
        self.lease_ttl = lease_ttl
        self.scheduler = None
        self.scheduler_address = None
        self.nodes = {}
        self.tls_dir = os.path.join(workdir, "tls") if tls else None
        if tls:
            make_certificates(self.tls_dir)

    def security_flags(self, node=None):
        """The daemon flags for this cluster's transport security; with
        `node`, its certificate is made first."""
        if not self.tls_dir:
            return ["--insecure"]
        if node:
            make_certificates(self.tls_dir, node)
        return [f"--tls_dir={self.tls_dir}"]

    def channel(self, address=None, identity="operator"):
        """A grpcio channel to the scheduler (or `address`) as `identity`
        (a certificate stem: operator, submitter, node-NAME)."""
        import grpc
        address = address or self.scheduler_address
        if not self.tls_dir:
            return grpc.insecure_channel(address)
        return grpc.secure_channel(address, tls_credentials(self.tls_dir, identity))

    def start_scheduler(self, listen="127.0.0.1:0", extra_args=()):
        if self.scheduler:
            self.scheduler.stop()
        self.scheduler = Daemon("scheduler", [
            SCHEDULER, f"--listen={listen}", f"--state_dir={self.state_dir}",
            f"--lease_ttl={self.lease_ttl}", *self.security_flags(), *extra_args], self.workdir)
        self.scheduler_address = self.scheduler.address()
        return self.scheduler_address

    def start_node(self, name, binary, extra_args=()):
        if name in self.nodes:
            self.nodes[name].stop()  # reap an earlier (killed) process of that name
        if binary == WORKER and not any(a.startswith("--checkpoint_root") for a in extra_args):
            # The tests' checkpoint directories live in the work directory.
            extra_args = (*extra_args, f"--checkpoint_root={self.workdir}")
        if binary == WORKER and not any(a.startswith("--data_root") for a in extra_args):
            # The tests prepare their datasets under the test's temporary directory.
            extra_args = (*extra_args, f"--data_root={TMP}")
        daemon = Daemon(name, [
            binary, f"--scheduler={self.scheduler_address}", f"--name={name}",
            "--listen=127.0.0.1:0", "--advertise_host=127.0.0.1", *self.security_flags(name),
            *extra_args], self.workdir)
        self.nodes[name] = daemon
        return daemon

    def cli_env(self):
        env = {**os.environ, "CORESCAPE_HOME": os.path.join(self.workdir, "home")}
        if self.tls_dir:
            env["CORESCAPE_TLS_DIR"] = self.tls_dir
        return env

    def cli(self, *args, check=True, timeout=30):
        """The CLI with this cluster's certificates (an --insecure cluster's
        callers pass --insecure themselves)."""
        result = subprocess.run([CLI, *args], capture_output=True, text=True,
                                timeout=timeout, env=self.cli_env())
        if check and result.returncode != 0:
            raise AssertionError(f"corescape {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def nodes_json(self):
        # A generous deadline: CI machines run other tests beside this one.
        result = self.cli("nodes", "--json", "--scheduler", self.scheduler_address,
                          "--rpc-timeout", "15")
        return {node["name"]: node for node in json.loads(result.stdout)}

    def wait_for_states(self, expected, timeout):
        """expected: {name: state}; returns the nodes once all match."""
        def check():
            nodes = self.nodes_json()
            if all(name in nodes and nodes[name]["state"] == state
                   for name, state in expected.items()):
                return nodes
            return None
        return wait_for(check, timeout, f"node states {expected}", interval=0.1)

    def stop_all(self):
        for daemon in self.nodes.values():
            daemon.stop()
        if self.scheduler:
            self.scheduler.stop()

    def dump_logs(self):
        for daemon in [self.scheduler, *self.nodes.values()]:
            if daemon:
                print(f"===== {daemon.name} =====\n{daemon.log()}", file=sys.stderr)


class ClusterTestCase(unittest.TestCase):
    """Base for tests whose setUp puts a Cluster in self.cluster: stops its
    daemons after each test and prints their logs when the test fails."""

    def tearDown(self):
        self.cluster.stop_all()

    def run(self, result=None):
        # Print every daemon's log when a test fails: the only way to debug CI.
        result = super().run(result)
        if result and (result.failures or result.errors):
            self.cluster.dump_logs()
        return result
