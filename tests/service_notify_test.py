"""The daemons speak systemd's notify protocol to a real NOTIFY_SOCKET: each
daemon gets a unix datagram socket of its own, as systemd gives each
Type=notify unit. READY=1 must come once the scheduler serves and once a
node is registered (not before: a worker started before its scheduler stays
unready), WATCHDOG=1 while healthy (the scheduler at half of WATCHDOG_USEC,
a node at every lease renewal: only once registered), STOPPING=1 on SIGTERM,
then a clean exit."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import cluster_harness as harness

WATCHDOG_USEC = 400_000  # the scheduler pings every 200 ms
# Nodes ping per lease renewal, i.e. per heartbeat: well inside WATCHDOG_USEC.
HEARTBEAT_INTERVAL = "100ms"


class NotifySocket:
    """A datagram socket standing in for systemd's; collects what arrives."""

    def __init__(self, directory, name):
        self.path = os.path.join(directory, f"{name}.notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages = []

    def receive(self, timeout):
        """Returns the next datagram's KEY=VALUE lines, or None after timeout."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096).decode()
        except socket.timeout:
            return None
        lines = data.split("\n")
        self.messages.append(lines)
        return lines

    def wait_for(self, key, timeout):
        """Receives until a datagram holds line `key`; returns (lines, when)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.receive(max(0.01, deadline - time.monotonic()))
            if lines is not None and key in lines:
                return lines, time.monotonic()
        raise AssertionError(f"no {key} within {timeout}s; got {self.messages}")

    def close(self):
        self.sock.close()


class ServiceNotifyTest(unittest.TestCase):

    def setUp(self):
        self.cluster = harness.Cluster(os.path.join(harness.TMP, self.id().split(".")[-1]))
        # Socket paths must stay under 108 bytes; $TEST_TMPDIR may not.
        self.sockets_dir = tempfile.mkdtemp(prefix="notify-")

    def tearDown(self):
        self.cluster.stop_all()
        shutil.rmtree(self.sockets_dir, ignore_errors=True)

    def run(self, result=None):
        # Every daemon's log when a test fails: what CI leaves to debug with.
        result = super().run(result)
        if result and (result.failures or result.errors):
            for name in sorted(os.listdir(self.cluster.workdir)):
                if name.endswith(".log"):
                    with open(os.path.join(self.cluster.workdir, name), errors="replace") as f:
                        print(f"===== {name} =====\n{f.read()}")
        return result

    def start_under_notify(self, name, argv, watchdog_pid="$$"):
        """Starts argv as systemd would start a Type=notify unit with
        WatchdogSec: its own NOTIFY_SOCKET, WATCHDOG_USEC, and WATCHDOG_PID
        naming the daemon's own pid (exec keeps the shell's)."""
        notify = NotifySocket(self.sockets_dir, name)
        env = {**os.environ, "NOTIFY_SOCKET": notify.path,
               "WATCHDOG_USEC": str(WATCHDOG_USEC)}
        with open(os.path.join(self.cluster.workdir, f"{name}.log"), "ab") as log:
            process = subprocess.Popen(
                ["sh", "-c", f'WATCHDOG_PID={watchdog_pid} exec "$@"', name, *argv],
                env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self.addCleanup(self.kill_and_close, process, notify)
        return process, notify

    @staticmethod
    def kill_and_close(process, notify):
        if process.poll() is None:
            process.kill()
            process.wait()
        notify.close()

    def stop_with_sigterm(self, process, notify):
        process.send_signal(signal.SIGTERM)
        notify.wait_for("STOPPING=1", timeout=10)
        self.assertEqual(process.wait(timeout=15), 0)

    def test_ready_after_registration_watchdog_and_stopping(self):
        # The scheduler's address is fixed before it runs, so that a worker
        # can be started first.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        address = f"127.0.0.1:{port}"
        worker, worker_notify = self.start_under_notify("worker-0", [
            harness.WORKER, f"--scheduler={address}", "--name=worker-0",
            "--listen=127.0.0.1:0", "--advertise_host=127.0.0.1",
            *self.cluster.security_flags("worker-0")])
        # Serving, but no scheduler to register with: not ready, and no
        # lease renewed to ping the watchdog for.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            lines = worker_notify.receive(timeout=max(0.01, deadline - time.monotonic()))
            self.assertNotIn("READY=1", lines or [])
        self.assertNotIn(["WATCHDOG=1"], worker_notify.messages)

        scheduler, scheduler_notify = self.start_under_notify("scheduler", [
            harness.SCHEDULER, f"--listen={address}",
            f"--state_dir={self.cluster.state_dir}", "--lease_ttl=2s",
            f"--heartbeat_interval={HEARTBEAT_INTERVAL}", *self.cluster.security_flags()])
        lines, _ = scheduler_notify.wait_for("READY=1", timeout=20)
        self.assertTrue(any(line.startswith("STATUS=serving on") for line in lines), lines)
        self.cluster.scheduler_address = address
        # Ready means serving: the operator API answers now.
        self.cluster.nodes_json()

        lines, _ = worker_notify.wait_for("READY=1", timeout=20)
        self.assertIn("STATUS=registered as worker-0", lines)
        # Ready means registered: the scheduler already lists it.
        self.assertEqual(self.cluster.nodes_json()["worker-0"]["state"], "ALIVE")

        for notify in (scheduler_notify, worker_notify):
            _, first = notify.wait_for("WATCHDOG=1", timeout=5)
            _, second = notify.wait_for("WATCHDOG=1", timeout=5)
            # Half the interval apart (generously: a loaded CI box).
            self.assertLess(second - first, WATCHDOG_USEC / 1e6)

        self.stop_with_sigterm(worker, worker_notify)
        self.cluster.wait_for_states({"worker-0": "DEREGISTERED"}, timeout=10)
        self.stop_with_sigterm(scheduler, scheduler_notify)

    def test_attention_server_ready_once_registered(self):
        address = self.cluster.start_scheduler()
        server, notify = self.start_under_notify("attn-0", [
            harness.ATTENTION_SERVER, f"--scheduler={address}", "--name=attn-0",
            "--listen=127.0.0.1:0", "--advertise_host=127.0.0.1",
            *self.cluster.security_flags("attn-0")])
        lines, _ = notify.wait_for("READY=1", timeout=20)
        self.assertIn("STATUS=registered as attn-0", lines)
        self.assertEqual(self.cluster.nodes_json()["attn-0"]["state"], "ALIVE")
        self.stop_with_sigterm(server, notify)

    def test_a_child_does_not_take_the_watchdog(self):
        # WATCHDOG_PID names another process: the daemon must not ping.
        scheduler, notify = self.start_under_notify("scheduler", [
            harness.SCHEDULER, "--listen=127.0.0.1:0", f"--state_dir={self.cluster.state_dir}",
            *self.cluster.security_flags()],
            watchdog_pid="1")
        notify.wait_for("READY=1", timeout=20)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            lines = notify.receive(timeout=0.2)
            self.assertNotIn("WATCHDOG=1", lines or [])
        self.stop_with_sigterm(scheduler, notify)


if __name__ == "__main__":
    unittest.main(verbosity=2)
