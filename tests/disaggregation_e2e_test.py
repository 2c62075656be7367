"""Core-attention disaggregation end to end on real processes: DISAGGREGATED
jobs train on 2 workers whose core attention runs on 1 or 2 attention-server
daemons, and end with the loss of the same job COLOCATED."""

import os
import unittest

import cluster_harness as harness
from corescape.v1 import job_pb2
from jobs_e2e_test import FINAL, Jobs, spec

STEPS = 20


class DisaggregationEndToEndTest(unittest.TestCase):

    def setUp(self):
        self.cluster = harness.Cluster(os.path.join(harness.TMP, self.id().split(".")[-1]), lease_ttl="4s")
        self.address = self.cluster.start_scheduler()
        self.jobs = Jobs(self.address)

    def tearDown(self):
        self.jobs.channel.close()
        self.cluster.stop_all()

    def run(self, result=None):
        result = super().run(result)
        if result and (result.failures or result.errors):
            self.cluster.dump_logs()
        return result

    def start(self, name, binary):
        self.cluster.start_node(name, binary, ["--threads=1"] + (
            ["--collective_timeout=10s"] if binary == harness.WORKER else []))

    def train(self, name, mode, servers=0, keep=True):
        s = spec(name, steps=STEPS, eval_interval=10)
        s.placement.workers = 2
        s.attention.mode = mode
        s.attention.attention_servers = servers
        s.attention.keep_qkv_for_backward = keep
        job_id = self.jobs.run(s)
        job = self.jobs.wait_state(job_id, FINAL, timeout=120)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        return job

    def test_disaggregated_jobs_match_colocated(self):
        for name in ("worker-0", "worker-1"):
            self.start(name, harness.WORKER)
        for name in ("attn-0", "attn-1"):
            self.start(name, harness.ATTENTION_SERVER)
        self.cluster.wait_for_states({"worker-0": "ALIVE", "worker-1": "ALIVE",
                                      "attn-0": "ALIVE", "attn-1": "ALIVE"}, timeout=20)

        colocated = self.train("colocated", job_pb2.COLOCATED)
        self.assertEqual(len(colocated.assigned_nodes), 2)

        one = self.train("one-server", job_pb2.DISAGGREGATED, servers=1, keep=False)
        self.assertEqual(len(one.assigned_nodes), 3)
        self.assertIn(one.assigned_nodes[2], ("attn-0", "attn-1"))
        two = self.train("two-servers", job_pb2.DISAGGREGATED, servers=2, keep=True)
        self.assertEqual(sorted(two.assigned_nodes[2:]), ["attn-0", "attn-1"])

        for job in (colocated, one, two):
            print(f"{job.spec.name}: loss {job.progress.loss:.8f} "
                  f"validation {job.progress.validation_loss:.8f}", flush=True)
        for job in (one, two):
            self.assertAlmostEqual(job.progress.loss, colocated.progress.loss,
                                   delta=1e-4 * colocated.progress.loss)
            self.assertAlmostEqual(job.progress.validation_loss,
                                   colocated.progress.validation_loss,
                                   delta=1e-4 * colocated.progress.validation_loss)
        # Every server that took part served the job to its end.
        for name in ("attn-0", "attn-1"):
            log = self.cluster.nodes[name].log()
            self.assertIn(f"attention for job {two.job_id} done: the workers finished", log)
            self.assertNotIn("failed", log)

    def test_job_waits_for_attention_servers(self):
        for name in ("worker-0", "worker-1"):
            self.start(name, harness.WORKER)
        self.cluster.wait_for_states({"worker-0": "ALIVE", "worker-1": "ALIVE"}, timeout=20)
        s = spec("waits", steps=3)
        s.placement.workers = 2
        s.attention.mode = job_pb2.DISAGGREGATED
        s.attention.attention_servers = 1
        job_id = self.jobs.run(s)
        harness.wait_for(lambda: "attention servers" in self.jobs.job(job_id).state_reason, 10,
                         "the job to wait for an attention server")
        self.assertEqual(self.jobs.job(job_id).state, job_pb2.PENDING)
        self.start("attn-0", harness.ATTENTION_SERVER)
        job = self.jobs.wait_state(job_id, FINAL, timeout=60)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)


if __name__ == "__main__":
    unittest.main()
