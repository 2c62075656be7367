"""`corescape cluster up` / `cluster down`: a local cluster started by the
CLI on free loopback ports, listed by `nodes --json` without --scheduler,
and stopped cleanly (every daemon gone, no cluster file left)."""

import json
import os
import subprocess
import time
import unittest

import cluster_harness as harness


def process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class ClusterCliTest(unittest.TestCase):

    def setUp(self):
        self.home = os.path.join(harness.TMP, "cli-home")
        os.makedirs(self.home, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if k != "CORESCAPE_SCHEDULER"}
        self.env["CORESCAPE_HOME"] = self.home

    def tearDown(self):
        self.corescape("cluster", "down", check=False)

    def corescape(self, *args, check=True, timeout=90):
        result = subprocess.run([harness.CLI, *args], capture_output=True, text=True,
                                env=self.env, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"corescape {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def test_cluster_up_lists_three_nodes_and_down_stops_them(self):
        up = self.corescape("cluster", "up", "--workers", "2", "--attention-servers", "1",
                            "--lease-ttl", "3")
        address = up.stdout.strip().splitlines()[-1]
        self.assertRegex(address, r"^127\.0\.0\.1:\d+$")

        # No --scheduler: the CLI finds the local cluster.
        nodes = json.loads(self.corescape("nodes", "--json").stdout)
        self.assertEqual(len(nodes), 3, nodes)
        self.assertEqual(sorted(n["role"] for n in nodes),
                         ["ATTENTION_SERVER", "WORKER", "WORKER"])
        for node in nodes:
            for key in ("name", "role", "state", "incarnation", "host", "pid",
                        "last_heartbeat"):
                self.assertIn(key, node)
            self.assertEqual(node["state"], "ALIVE")
            self.assertTrue(process_alive(node["pid"]), node)
        pids = [n["pid"] for n in nodes]

        # The explicit address and $CORESCAPE_SCHEDULER work the same way.
        explicit = json.loads(self.corescape("nodes", "--json", "--scheduler", address).stdout)
        self.assertEqual(len(explicit), 3)
        self.env["CORESCAPE_SCHEDULER"] = address
        self.assertEqual(len(json.loads(self.corescape("nodes", "--json").stdout)), 3)
        del self.env["CORESCAPE_SCHEDULER"]

        table = self.corescape("nodes").stdout
        self.assertIn("NAME", table.splitlines()[0])
        self.assertEqual(len(table.strip().splitlines()), 4, table)

        status = json.loads(self.corescape("status", "--json").stdout)
        self.assertEqual(json.dumps(status).count("NODE_REGISTERED"), 3, status)

        # A second `cluster up` refuses while this one runs.
        again = self.corescape("cluster", "up", check=False)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("already", again.stderr)

        down = self.corescape("cluster", "down")
        self.assertEqual(down.returncode, 0)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(process_alive(p) for p in pids):
            time.sleep(0.05)
        self.assertFalse([p for p in pids if process_alive(p)])
        self.assertFalse(os.path.exists(os.path.join(self.home, "cluster.json")))

        # Without a cluster, commands say what to do in one line.
        missing = self.corescape("nodes", check=False)
        self.assertNotEqual(missing.returncode, 0)
        self.assertEqual(len(missing.stderr.strip().splitlines()), 1, missing.stderr)
        self.assertIn("cluster up", missing.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
