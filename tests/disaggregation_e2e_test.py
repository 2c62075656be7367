"""Core-attention disaggregation end to end on real processes: DISAGGREGATED
jobs train on 2 workers whose core attention runs on 1 or 2 attention-server
daemons, and IN_PLACE jobs whose 2 workers serve each other's attention, and
end with the loss of the same job COLOCATED — also when one of the servers is
killed mid-job (re-planned over the other, no restart)."""

import json
import os
import re
import signal
import unittest

import cluster_harness as harness
from corescape.v1 import job_pb2
from jobs_e2e_test import FINAL, JobClusterTestCase, spec

STEPS = 20


class DisaggregationEndToEndTest(JobClusterTestCase):

    def start(self, name, binary):
        self.cluster.start_node(name, binary, ["--threads=1"] + (
            ["--collective_timeout=10s"] if binary == harness.WORKER else []))

    def start_workers_and_servers(self):
        """Starts two workers and two attention servers and waits until all are alive."""
        for name in ("worker-0", "worker-1"):
            self.start(name, harness.WORKER)
        for name in ("attn-0", "attn-1"):
            self.start(name, harness.ATTENTION_SERVER)
        self.cluster.wait_for_states({"worker-0": "ALIVE", "worker-1": "ALIVE",
                                      "attn-0": "ALIVE", "attn-1": "ALIVE"}, timeout=20)

    def assert_loss_as_colocated(self, job, colocated):
        """Training and validation loss within 1e-4 (relative) of the colocated job's."""
        self.assertAlmostEqual(job.progress.loss, colocated.progress.loss,
                               delta=1e-4 * colocated.progress.loss)
        self.assertAlmostEqual(job.progress.validation_loss, colocated.progress.validation_loss,
                               delta=1e-4 * colocated.progress.validation_loss)

    def assert_served_to_the_end(self, log, job_id):
        # The workers' goodbye and the scheduler's StopJob ("job succeeded")
        # race at the end of a job; either is a clean end.
        self.assertRegex(log, re.escape(f"attention for job {job_id} ") +
                         r"(done: the workers finished|stopped: .*job succeeded)")

    def job_spec(self, name, mode, servers=0, keep=True, steps=STEPS, ping_pong=None, **kwargs):
        s = spec(name, steps=steps, eval_interval=10, **kwargs)
        s.placement.workers = 2
        s.attention.mode = mode
        s.attention.attention_servers = servers
        s.attention.keep_qkv_for_backward = keep
        if ping_pong is not None:  # unset: on for DISAGGREGATED
            s.attention.ping_pong = ping_pong
        return s

    def train(self, name, mode, servers=0, keep=True, steps=STEPS, ping_pong=None):
        job_id = self.jobs.run(self.job_spec(name, mode, servers, keep, steps, ping_pong))
        job = self.jobs.wait_state(job_id, FINAL, timeout=120)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        return job

    def train_rebalanced(self, name, servers):
        """As `train`, but `corescape rebalance` once the job runs: the
        scheduler pushes its speed weights to the workers, and from the next
        micro-batch every participant plans with worker 0's. Returns the job
        and the version pushed."""
        job_id = self.jobs.run(self.job_spec(name, job_pb2.DISAGGREGATED, servers))
        harness.wait_for(lambda: self.jobs.job(job_id).progress.step >= 3, 120, "step 3",
                         interval=0.02)
        version = self.cli_json("rebalance", job_id)[0]["pushed_weights_version"]
        self.assertGreaterEqual(version, 1, "a RUNNING job's workers get the weights")
        job = self.jobs.wait_state(job_id, FINAL, timeout=120)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        return job, version

    def cli_json(self, *args):
        result = self.cluster.cli(*args, "--json", "--scheduler", self.address,
                                  "--rpc-timeout", "15")
        return json.loads(result.stdout)

    def check_plans_came_ahead(self, *jobs):
        """The scheduler planned each step while the one before ran: most
        micro-batches ran on its plans (worker 0 shipped them), on every
        participant alike; the first step and validation are planned here."""
        def counts(log, prefix):
            found = re.findall(prefix + r"(\d+) of (\d+) micro-batches on the scheduler's "
                               r"plans, (\d+) planned here", log)
            self.assertTrue(found, f"no plan counts after {prefix!r}")
            return [tuple(int(x) for x in f) for f in found]

        for job in jobs:
            # Per step: ping-pong halves A and B, or one whole micro-batch.
            attention = job.spec.attention
            per_step = 1 if attention.HasField("ping_pong") and not attention.ping_pong else 2
            for name in job.assigned_nodes[2:]:
                log = self.cluster.nodes[name].log()
                [(scheduled, total, here)] = counts(log, re.escape(f"attention for job {job.job_id} ")
                                                    + r".*; ")
                print(f"{job.spec.name} on {name}: {scheduled} of {total} micro-batches on the "
                      f"scheduler's plans", flush=True)
                self.assertEqual(scheduled + here, total)
                self.assertGreaterEqual(scheduled, STEPS * per_step // 2, log[-2000:])
            worker0 = self.cluster.nodes[job.assigned_nodes[0]].log()
            self.assertIn("attention worker 0: ", worker0)
            self.assertRegex(worker0, r"the scheduler's plan of step \d+")

    def check_attention_plans(self, colocated, job):
        """The scheduler planned every step of `job` (2 servers) from the
        workers' demands, weighted by the servers' timings; `corescape plan`
        and `corescape rebalance` show it."""
        harness.wait_for(lambda: self.cli_json("plan", job.job_id)["step"] == STEPS, 10,
                         f"the plan of step {STEPS}")
        plan = self.cli_json("plan", job.job_id)
        print(f"plan of {job.job_id} step {plan['step']}: imbalance {plan['imbalance']:.4f}, "
              f"{plan['bytes_moved']} bytes moved, servers " + ", ".join(
                  f"{s['name']} weight {s['speed_weight']:.3f} share {s['share']:.3f}"
                  for s in plan["servers"]), flush=True)
        self.assertEqual(plan["generation"], job.generation)
        self.assertEqual(sorted(s["name"] for s in plan["servers"]), ["attn-0", "attn-1"])
        self.assertEqual(plan["excluded_servers"], [])
        for server in plan["servers"]:
            self.assertGreater(server["cost"], 0, server)
            self.assertGreater(server["tasks"], 0, server)
            self.assertGreater(server["measured_speed"], 0, f"no timings from {server['name']}")
        weights = [s["speed_weight"] for s in plan["servers"]]
        self.assertAlmostEqual(sum(weights) / len(weights), 1.0, places=6)
        self.assertLessEqual(plan["imbalance"], 1 + plan["tolerance"] + 0.02)
        self.assertEqual(len(plan["worker_tokens"]), 2)
        self.assertTrue(all(tokens > 0 for tokens in plan["worker_tokens"]))

        table = self.cluster.cli("plan", job.job_id, "--scheduler", self.address).stdout
        self.assertIn("Imbalance:", table)
        self.assertRegex(table, r"(?m)^attn-0 ")

        rebalanced = self.cli_json("rebalance", job.job_id)
        self.assertEqual(len(rebalanced), 1)
        self.assertEqual(rebalanced[0]["step"], STEPS)
        self.assertGreaterEqual(rebalanced[0]["planned_unix_ms"], plan["planned_unix_ms"])
        self.assertLessEqual(rebalanced[0]["imbalance"], 1 + plan["tolerance"] + 0.02)
        self.assertTrue(all(s["cost"] > 0 for s in rebalanced[0]["servers"]))
        self.assertEqual(self.cli_json("plan", job.job_id)["planned_unix_ms"],
                         rebalanced[0]["planned_unix_ms"])
        self.assertEqual(self.cli_json("rebalance"), [], "no job is running any more")
        events = self.cli_json("status")["recent_events"]
        self.assertTrue(any(e["kind"] == "ATTENTION_REPLANNED" and e["job_id"] == job.job_id
                            for e in events), events)

        # A COLOCATED job has no plan: exit 1 with the reason; unknown: 4.
        result = self.cluster.cli("plan", colocated.job_id, "--scheduler", self.address,
                                  check=False)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("COLOCATED", result.stderr)
        result = self.cluster.cli("plan", "job-nosuch", "--scheduler", self.address,
                                  check=False)
        self.assertEqual(result.returncode, 4, result.stderr)

    def check_in_place(self, colocated):
        """An IN_PLACE job (the 2 workers serve each other's attention; the
        idle attention servers take no part) ends with the colocated loss."""
        job = self.train("in-place", job_pb2.IN_PLACE)
        self.assertEqual(sorted(job.assigned_nodes), ["worker-0", "worker-1"])
        print(f"in-place: loss {job.progress.loss:.8f} "
              f"validation {job.progress.validation_loss:.8f}", flush=True)
        self.assert_loss_as_colocated(job, colocated)
        for name in ("worker-0", "worker-1"):
            self.assertRegex(self.cluster.nodes[name].log(),
                             rf"job {job.job_id} rank \d: core attention in place over 2 "
                             r"workers, ping-pong halves")
            done = [line for line in self.cluster.nodes[name].log().splitlines()
                    if f"in-place attention {job.job_id}/attn-inplace" in line
                    and " done: " in line]
            self.assertEqual(len(done), 1, f"{name} did not end its in-place attention cleanly")
            print(done[0].split("] ", 1)[-1], flush=True)
        for name in ("attn-0", "attn-1"):
            self.assertNotIn(job.job_id, self.cluster.nodes[name].log())

    def test_disaggregated_jobs_match_colocated(self):
        self.start_workers_and_servers()

        colocated = self.train("colocated", job_pb2.COLOCATED)
        self.assertEqual(len(colocated.assigned_nodes), 2)
        self.check_in_place(colocated)

        # Whole micro-batches here; the other DISAGGREGATED jobs run the
        # default, ping-pong halves (4 rows per micro-batch: 2 + 2).
        one = self.train("one-server", job_pb2.DISAGGREGATED, servers=1, keep=False,
                         ping_pong=False)
        self.assertEqual(len(one.assigned_nodes), 3)
        self.assertIn(one.assigned_nodes[2], ("attn-0", "attn-1"))
        two, version = self.train_rebalanced("two-servers", servers=2)
        for name in ("worker-0", "worker-1"):
            log = self.cluster.nodes[name].log()
            self.assertRegex(log, rf"job {one.job_id} rank \d: core attention on 1 attention "
                                  r"server\(s\), whole micro-batches")
            self.assertRegex(log, rf"job {two.job_id} rank \d: core attention on 2 attention "
                                  r"server\(s\), ping-pong halves")
        self.assertEqual(sorted(two.assigned_nodes[2:]), ["attn-0", "attn-1"])
        # Every participant planned with the pushed weights (worker 0's).
        for name in ("worker-0", "worker-1", "attn-0", "attn-1"):
            self.assertIn(f"planning with speed weights version {version} from micro-batch",
                          self.cluster.nodes[name].log(), name)
        self.check_plans_came_ahead(one, two)

        for job in (colocated, one, two):
            print(f"{job.spec.name}: loss {job.progress.loss:.8f} "
                  f"validation {job.progress.validation_loss:.8f}", flush=True)
        for job in (one, two):
            self.assert_loss_as_colocated(job, colocated)
        # Every server that took part served the job to its end.
        for name in ("attn-0", "attn-1"):
            log = self.cluster.nodes[name].log()
            self.assert_served_to_the_end(log, two.job_id)
            self.assertNotIn("failed", log)
        self.check_attention_plans(colocated, two)

    def test_killed_attention_server_costs_a_step_not_a_restart_and_grows_back(self):
        self.start_workers_and_servers()
        steps = 40
        colocated = self.train("colocated", job_pb2.COLOCATED, steps=steps)

        # Checkpoints on, so a restart from one would be possible (and seen).
        checkpoints = os.path.join(self.cluster.workdir, "ckpt")
        job_id = self.jobs.run(self.job_spec(
            "failover", job_pb2.DISAGGREGATED, servers=2, steps=steps,
            checkpoint_dir=checkpoints, checkpoint_interval=5))
        harness.wait_for(lambda: self.jobs.job(job_id).progress.step >= 7, 120, "step 7",
                         interval=0.02)
        running = self.jobs.job(job_id)
        # Server 0: the survivor's attention rank changes too (W + 1 → W + 0).
        victim, survivor = running.assigned_nodes[2], running.assigned_nodes[3]
        self.cluster.nodes[victim].kill(signal.SIGKILL)
        # Re-planned over the survivor; then a new server registers and the
        # job grows back to the two servers it asked for, still no restart.
        harness.wait_for(lambda: self.jobs.job(job_id).attention_epoch >= 1, 60,
                         "the re-plan without the killed server", interval=0.05)
        self.assertEqual(self.jobs.job(job_id).state, job_pb2.RUNNING)
        self.start("attn-2", harness.ATTENTION_SERVER)

        job = self.jobs.wait_state(job_id, FINAL, timeout=120)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        self.assertEqual(job.generation, 1)
        self.assertEqual(job.recoveries, 0)
        self.assertEqual(job.attention_epoch, 2)
        self.assertEqual(list(job.assigned_nodes),
                         list(running.assigned_nodes[:2]) + [survivor, "attn-2"])
        events = list(self.jobs.watch(job_pb2.WatchJobRequest(job_id=job_id), timeout=30))
        replans = [e for e in events if e.WhichOneof("body") == "attention_epoch"]
        self.assertEqual(len(replans), 2, [e.message for e in replans])
        self.assertIn(f"attention server 0 ({victim}) is DEAD", replans[0].message)
        self.assertIn(f"re-planned over 1 attention server ({survivor})", replans[0].message)
        self.assertIn("attention server attn-2 joined", replans[1].message)
        self.assertIn(f"re-planned over 2 attention servers ({survivor}, attn-2)",
                      replans[1].message)
        states = [e.state for e in events if e.WhichOneof("body") == "state"]
        self.assertEqual(states, [job_pb2.PENDING, job_pb2.RUNNING, job_pb2.SUCCEEDED])
        # Every step reported once, in order: the failed one was redone, not skipped.
        progress = [e.progress.step for e in events if e.WhichOneof("body") == "progress"]
        self.assertEqual(progress, list(range(1, steps + 1)))
        for name in ("worker-0", "worker-1"):
            log = self.cluster.nodes[name].log()
            self.assertNotIn("restored checkpoint", log)
            self.assertIn(f"job {job_id} rank", log)
            self.assertIn("joining attention epoch 1", log)
            self.assertIn("joining attention epoch 2", log)
        for name in (survivor, "attn-2"):
            self.assert_served_to_the_end(self.cluster.nodes[name].log(), job_id)
        # The loss trajectory is unchanged.
        print(f"colocated: loss {colocated.progress.loss:.8f} validation "
              f"{colocated.progress.validation_loss:.8f}; after failover: loss "
              f"{job.progress.loss:.8f} validation {job.progress.validation_loss:.8f}",
              flush=True)
        self.assert_loss_as_colocated(job, colocated)

    def test_killed_in_place_worker_recovers_from_checkpoint(self):
        """IN_PLACE (ping-pong halves, both in flight when the peer dies):
        a killed worker is a recovery from the checkpoint on a spare, with
        no hang, and the loss trajectory is unchanged."""
        for name in ("worker-0", "worker-1", "worker-2"):
            self.start(name, harness.WORKER)
        self.cluster.wait_for_states({"worker-0": "ALIVE", "worker-1": "ALIVE",
                                      "worker-2": "ALIVE"}, timeout=20)
        steps = 40
        colocated = self.train("colocated", job_pb2.COLOCATED, steps=steps)
        checkpoints = os.path.join(self.cluster.workdir, "ckpt")
        job_id = self.jobs.run(self.job_spec("in-place-kill", job_pb2.IN_PLACE, steps=steps,
                                             checkpoint_dir=checkpoints,
                                             checkpoint_interval=5))
        harness.wait_for(lambda: self.jobs.job(job_id).progress.checkpoint_step >= 10, 120,
                         "a checkpoint at step 10", interval=0.02)
        running = self.jobs.job(job_id)
        victim = running.assigned_nodes[1]
        self.cluster.nodes[victim].kill(signal.SIGKILL)
        job = self.jobs.wait_state(job_id, FINAL, timeout=180)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        # One recovery: the survivor's failure report comes before the dead
        # node's lease expires, and the job is not placed on it again.
        self.assertEqual(job.recoveries, 1)
        self.assertNotIn(victim, job.assigned_nodes)
        survivor = running.assigned_nodes[0]
        self.assertIn(survivor, job.assigned_nodes)
        self.assertIn("restored checkpoint", self.cluster.nodes[survivor].log())
        print(f"colocated: loss {colocated.progress.loss:.8f}; in place after a kill: loss "
              f"{job.progress.loss:.8f} ({job.recoveries} recoveries)", flush=True)
        self.assert_loss_as_colocated(job, colocated)

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
