"""A stranger on every port during a live job: while a DISAGGREGATED job
trains on 2 workers and an attention server, every TCP port that any
corescape process listens on (found from /proc, not from configuration:
gRPC, the data-plane handshake listener, UCX's own TCP interfaces) gets
random bytes of many sizes, length prefixes of 0, 15, 2^32 and 2^40 with
short bodies and a close, single bytes at intervals, and bursts of
connect-and-close (port_sweep.py). Afterwards the job has SUCCEEDED with
the loss of the same job run without the attack, at generation 1 with no
recovery; every daemon is the process it was; each is back to idle within
a few seconds and holds no socket in CLOSE-WAIT; and every listener is on
the loopback address the daemons were given."""

import time
import unittest

import cluster_harness as harness
import port_sweep
from corescape.v1 import job_pb2
from jobs_e2e_test import FINAL, JobClusterTestCase, spec

STEPS = 60
# A daemon between jobs costs a few percent of a core (leases, heartbeats).
IDLE_CORES = 0.1


class PortSweepTest(JobClusterTestCase):

    def job_spec(self, name):
        s = spec(name, steps=STEPS, eval_interval=STEPS)
        s.placement.workers = 2
        s.attention.mode = job_pb2.DISAGGREGATED
        s.attention.attention_servers = 1
        return s

    def daemons(self):
        return {"scheduler": self.cluster.scheduler, **self.cluster.nodes}

    def assert_idle(self, name, pid):
        share = harness.wait_for(
            lambda: (lambda s: s if s < IDLE_CORES else None)(port_sweep.cpu_share(pid, 0.5)),
            10, f"{name} idle")
        print(f"{name}: {share:.3f} cores when idle", flush=True)

    def test_a_stranger_on_every_port_ends_nothing(self):
        for name in ("worker-0", "worker-1"):
            self.cluster.start_node(name, harness.WORKER,
                                    ["--threads=1", "--collective_timeout=10s"])
        self.cluster.start_node("attn-0", harness.ATTENTION_SERVER, ["--threads=1"])
        self.cluster.wait_for_states({"worker-0": "ALIVE", "worker-1": "ALIVE",
                                      "attn-0": "ALIVE"}, timeout=20)
        pids = {name: d.process.pid for name, d in self.daemons().items()}

        unbroken = self.jobs.wait_state(self.jobs.run(self.job_spec("unbroken")), FINAL,
                                        timeout=120)
        self.assertEqual(unbroken.state, job_pb2.SUCCEEDED, unbroken.state_reason)

        job_id = self.jobs.run(self.job_spec("attacked"))
        harness.wait_for(lambda: self.jobs.job(job_id).progress.step >= 1, 60, "step 1",
                         interval=0.02)
        ports = {name: port_sweep.listening_ports(pid) for name, pid in pids.items()}
        for name, listening in ports.items():
            print(f"{name} (pid {pids[name]}) listens on {listening}", flush=True)
            self.assertTrue(listening, f"{name} listens nowhere?")
            for host, port in listening:
                self.assertEqual(host, "127.0.0.1",
                                 f"{name} listens on {host}:{port}, not the address it was given")
        # The node daemons' data planes: the handshake listener and UCX's TCP interface.
        for name in ("worker-0", "worker-1", "attn-0"):
            self.assertGreaterEqual(len(ports[name]), 3, f"{name}: {ports[name]}")
        started = time.monotonic()
        port_sweep.sweep([address for listening in ports.values() for address in listening])
        swept_at = self.jobs.job(job_id).progress.step
        print(f"the sweep took {time.monotonic() - started:.1f}s and ended at step {swept_at} "
              f"of {STEPS}", flush=True)

        job = self.jobs.wait_state(job_id, FINAL, timeout=120)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        self.assertEqual(job.generation, 1)
        self.assertEqual(job.recoveries, 0)
        self.assertLess(swept_at, STEPS, "the job ended before the sweep did: make it longer")
        self.assertAlmostEqual(job.progress.loss, unbroken.progress.loss,
                               delta=1e-4 * unbroken.progress.loss)
        self.assertAlmostEqual(job.progress.validation_loss, unbroken.progress.validation_loss,
                               delta=1e-4 * unbroken.progress.validation_loss)
        print(f"loss {job.progress.loss:.6f} (unbroken {unbroken.progress.loss:.6f})",
              flush=True)

        for name, daemon in self.daemons().items():
            self.assertIsNone(daemon.process.poll(), f"{name} exited:\n{daemon.log()[-3000:]}")
            self.assertEqual(daemon.process.pid, pids[name], f"{name} was restarted")
            self.assert_idle(name, pids[name])
            harness.wait_for(lambda: port_sweep.close_wait_count(pids[name]) == 0, 10,
                             f"{name} to close its CLOSE-WAIT sockets")
        nodes = self.cluster.nodes_json()
        for name in ("worker-0", "worker-1", "attn-0"):
            self.assertEqual(str(nodes[name]["incarnation"]), "1", nodes[name])


if __name__ == "__main__":
    unittest.main()
