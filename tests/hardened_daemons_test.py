"""The daemons still work under their units' hardening: a scheduler, two
workers and an attention server, each run in the sandbox its unit in
deploy/systemd describes (systemd_sandbox.py: unprivileged user, no
capabilities, the unit's syscall filter and address families, a read-only
system but for its own directory), register, train a two-worker job over the
UCX data plane to SUCCEEDED, and exit 0 on SIGTERM."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import cluster_harness as harness
import systemd_sandbox

SYSTEMD = os.path.join(harness.RUNFILES, "deploy", "systemd")
DROP_IN = os.path.join(SYSTEMD, "corescape-.service.d", "hardening.conf")
UID = GID = 10001  # the corescape user of deploy/image/passwd; any unprivileged one would do


class HardenedDaemonsTest(unittest.TestCase):

    def setUp(self):
        # Outside /root (the runfiles' home, closed to the unprivileged user).
        self.work = tempfile.mkdtemp(prefix="corescape-hardened-", dir="/tmp")
        os.chmod(self.work, 0o755)
        self.bin = os.path.join(self.work, "bin")
        os.makedirs(self.bin)
        for binary in (harness.SCHEDULER, harness.WORKER, harness.ATTENTION_SERVER):
            shutil.copy(binary, self.bin)
        self.processes = {}
        self.tls_dir = os.path.join(self.work, "tls")

    def tearDown(self):
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def run(self, result=None):
        result = super().run(result)
        if result and (result.failures or result.errors) and os.path.isdir(self.work):
            for name in sorted(os.listdir(self.work)):
                log = os.path.join(self.work, name, "log")
                if os.path.exists(log):
                    with open(log, errors="replace") as f:
                        print(f"===== {name} =====\n{f.read()}")
        shutil.rmtree(self.work, ignore_errors=True)
        return result

    def own_directory(self, name):
        path = os.path.join(self.work, name)
        os.makedirs(path)
        os.chown(path, UID, GID)
        return path

    def sandboxed(self, unit, argv, writable):
        return systemd_sandbox.sandboxed_argv(
            [os.path.join(SYSTEMD, unit), DROP_IN], argv, UID, GID, writable, self.work)

    def start(self, name, unit, binary, args):
        directory = self.own_directory(name)
        argv = [os.path.join(self.bin, binary), *args,
                f"--port_file={directory}/addr"]
        with open(os.path.join(directory, "log"), "wb") as log:
            self.processes[name] = subprocess.Popen(
                self.sandboxed(unit, argv, [directory]), stdout=log, stderr=log,
                stdin=subprocess.DEVNULL)
        return directory

    def address(self, name, directory):
        def read():
            process = self.processes[name]
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}")
            path = os.path.join(directory, "addr")
            if not os.path.exists(path):
                return None
            with open(path) as f:
                return f.read().strip()
        return harness.wait_for(read, 30, f"{name} to serve")

    def cli(self, *args, timeout=60):
        env = {**os.environ, "HOME": self.work}
        if os.path.isdir(self.tls_dir):
            env["CORESCAPE_TLS_DIR"] = self.tls_dir
        return subprocess.run([harness.CLI, *args], capture_output=True, text=True,
                              timeout=timeout, env=env)

    def make_certificates(self, *nodes):
        """Mutual TLS as the units run it: one directory of certificates,
        readable by the daemons' user (like /etc/corescape/tls)."""
        harness.make_certificates(self.tls_dir, *nodes)
        for root, _, files in os.walk(self.tls_dir):
            os.chown(root, UID, GID)
            for name in files:
                os.chown(os.path.join(root, name), UID, GID)

    def test_the_sandbox_bites(self):
        # Without the sandbox an unprivileged AF_PACKET socket fails with
        # EPERM and a write into /usr with EACCES; under it, with the
        # unit's own answers: EAFNOSUPPORT and EROFS.
        probe = ("import errno, os, socket\n"
                 "try: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
                 "except OSError as e: print(errno.errorcode[e.errno])\n"
                 "try: open('/usr/corescape-probe', 'w')\n"
                 "except OSError as e: print(errno.errorcode[e.errno])\n")
        result = subprocess.run(
            self.sandboxed("corescape-worker.service", ["/usr/bin/python3", "-c", probe],
                           [self.own_directory("probe")]),
            capture_output=True, text=True, timeout=60)
        self.assertEqual(result.stdout.split(), ["EAFNOSUPPORT", "EROFS"], result.stderr)

    def test_daemons_register_train_and_stop_under_their_units_hardening(self):
        data = os.path.join(self.work, "fortunes")
        prepared = self.cli("data", "prepare", "--input=/usr/share/games/fortunes",
                            "--delimiter=%", f"--output={data}", timeout=120)
        self.assertEqual(prepared.returncode, 0, prepared.stderr)

        self.make_certificates("worker-0", "worker-1", "attn-0")
        scheduler_dir = self.start("scheduler", "corescape-scheduler.service",
                                   "corescape-scheduler", [
                                       "--listen=127.0.0.1:0", "--lease_ttl=3s",
                                       f"--state_dir={self.work}/scheduler/state",
                                       f"--tls_dir={self.tls_dir}"])
        address = self.address("scheduler", scheduler_dir)
        node_args = [f"--scheduler={address}", "--listen=127.0.0.1:0",
                     "--advertise_host=127.0.0.1", f"--tls_dir={self.tls_dir}"]
        for name in ("worker-0", "worker-1"):
            self.start(name, "corescape-worker.service", "corescape-worker",
                       [*node_args, f"--name={name}", f"--data_root={self.work}"])
        self.start("attn-0", "corescape-attention-server.service",
                   "corescape-attention-server", [*node_args, "--name=attn-0"])

        def all_alive():
            result = self.cli("nodes", "--json", "--scheduler", address)
            if result.returncode != 0:
                return None
            nodes = {n["name"]: n["state"] for n in json.loads(result.stdout)}
            return all(nodes.get(n) == "ALIVE" for n in ("worker-0", "worker-1", "attn-0"))

        harness.wait_for(all_alive, 30, "every node ALIVE", interval=0.5)

        job = self.cli("submit", "--scheduler", address, "--wait", "--name=hardened",
                       "--model=tiny", f"--train-data={data}", f"--validation-data={data}",
                       "--steps=4", "--workers=2", "--seq-len=64", timeout=240)
        self.assertEqual(job.returncode, 0, f"{job.stdout}\n{job.stderr}")
        self.assertIn("SUCCEEDED", job.stdout + job.stderr)
        self.assertIn("tokens/s (average over 4 steps)", job.stdout)

        for name in ("attn-0", "worker-1", "worker-0", "scheduler"):
            self.processes[name].terminate()
            self.assertEqual(self.processes[name].wait(timeout=20), 0, name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
