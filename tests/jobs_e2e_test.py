"""Training jobs end to end on real processes: submit over gRPC, gang
scheduling, progress, checkpoints, kill -9 recovery, scheduler restart,
cancel, invalid specs."""

import os
import signal
import subprocess
import time
import unittest

import grpc
from google.protobuf import json_format

import cluster_harness as harness
from corescape.v1 import job_pb2

DATA_DIR = os.path.join(harness.TMP, "fortunes-data")


def prepare_data():
    if not os.path.exists(os.path.join(DATA_DIR, "manifest.json")):
        subprocess.run([harness.CLI, "data", "prepare", "--input=/usr/share/games/fortunes",
                        "--delimiter=%", f"--output={DATA_DIR}"], check=True,
                       capture_output=True, timeout=120)
    return DATA_DIR


def spec(name, steps, checkpoint_dir="", workers=1, checkpoint_interval=0, eval_interval=0):
    s = job_pb2.JobSpec(name=name, steps=steps, seed=7, eval_interval_steps=eval_interval)
    s.model.preset = "tiny"
    s.data.train_shards.append(prepare_data())
    s.data.sequence_length = 64
    s.data.micro_batch_size = 4
    s.optimizer.name = "adamw"
    s.optimizer.learning_rate = 3e-3
    s.optimizer.warmup_steps = 10
    s.placement.workers = workers
    if checkpoint_dir:
        s.checkpoint.directory = checkpoint_dir
        s.checkpoint.interval_steps = checkpoint_interval
    return s


class Jobs:
    """JobService over `channel` (e.g. Cluster.channel(): mutual TLS)."""

    def __init__(self, channel):
        self.channel = channel

        def unary(method, req, resp):
            return self.channel.unary_unary(f"/corescape.v1.JobService/{method}",
                                            request_serializer=req.SerializeToString,
                                            response_deserializer=resp.FromString)
        self.submit = unary("SubmitJob", job_pb2.SubmitJobRequest, job_pb2.SubmitJobResponse)
        self.get = unary("GetJob", job_pb2.GetJobRequest, job_pb2.GetJobResponse)
        self.cancel = unary("CancelJob", job_pb2.CancelJobRequest, job_pb2.CancelJobResponse)
        self.watch = self.channel.unary_stream(
            "/corescape.v1.JobService/WatchJob",
            request_serializer=job_pb2.WatchJobRequest.SerializeToString,
            response_deserializer=job_pb2.JobEvent.FromString)

    def job(self, job_id):
        return self.get(job_pb2.GetJobRequest(job_id=job_id), timeout=5).job

    def run(self, s):
        return self.submit(job_pb2.SubmitJobRequest(spec=s), timeout=5).job.job_id

    def wait_state(self, job_id, states, timeout):
        return harness.wait_for(lambda: self.job(job_id) if self.job(job_id).state in states
                                else None, timeout, f"{job_id} in {states}", interval=0.1)


FINAL = (job_pb2.SUCCEEDED, job_pb2.FAILED, job_pb2.CANCELLED)


class JobClusterTestCase(harness.ClusterTestCase):
    """A scheduler of its own per test, a JobService client, and the
    daemons' logs printed when the test fails."""

    def setUp(self):
        # A lease long enough that a loaded machine never expires a healthy
        # node (the restart test relies on the grace lease), short enough
        # that a killed worker is noticed quickly.
        self.cluster = harness.Cluster(os.path.join(harness.TMP, self.id().split(".")[-1]),
                                       lease_ttl="4s")
        self.address = self.cluster.start_scheduler()
        self.jobs = Jobs(self.cluster.channel())

    def tearDown(self):
        self.jobs.channel.close()
        super().tearDown()


class JobsEndToEndTest(JobClusterTestCase):

    def start_worker(self, name="worker-0"):
        self.cluster.start_node(name, harness.WORKER,
                                ["--collective_timeout=5s", "--threads=1"])
        self.cluster.wait_for_states({name: "ALIVE"}, timeout=20)

    def kill_worker_1_after_checkpoint(self, job_id, step):
        """Kills worker-1 once job_id has checkpointed step, starts worker-2 in
        its place and returns the job in its final state."""
        harness.wait_for(lambda: self.jobs.job(job_id).progress.checkpoint_step >= step, 120,
                         f"a checkpoint at step {step}", interval=0.02)
        self.cluster.nodes["worker-1"].kill(signal.SIGKILL)
        self.start_worker("worker-2")
        return self.jobs.wait_state(job_id, FINAL, timeout=180)

    def final_crc(self, name, job_id):
        log = self.cluster.nodes[name].log()
        marker = f"job {job_id} rank "
        lines = [l for l in log.splitlines() if marker in l and "parameter crc32c" in l]
        self.assertTrue(lines, f"{name} never finished {job_id}")
        return lines[-1].rsplit(" ", 1)[-1]

    def test_two_workers_train_identically_and_match_one_worker(self):
        self.start_worker("worker-0")
        self.start_worker("worker-1")
        s = spec("two", steps=30)
        s.placement.workers = 2
        two = self.jobs.run(s)
        job_two = self.jobs.wait_state(two, FINAL, timeout=120)
        self.assertEqual(job_two.state, job_pb2.SUCCEEDED, job_two.state_reason)
        self.assertGreater(job_two.progress.bytes_sent, 0)
        # Replicas end bitwise identical.
        self.assertEqual(self.final_crc("worker-0", two), self.final_crc("worker-1", two))
        # One worker with twice the micro-batch sees the same rows in the same order.
        s = spec("one", steps=30)
        s.data.micro_batch_size = 8
        one = self.jobs.run(s)
        job_one = self.jobs.wait_state(one, FINAL, timeout=120)
        self.assertEqual(job_one.state, job_pb2.SUCCEEDED, job_one.state_reason)
        self.assertAlmostEqual(job_two.progress.loss, job_one.progress.loss,
                               delta=1e-5 * job_one.progress.loss)

    def test_scape_job_trains_and_sends_less_than_dense_adams(self):
        self.start_worker("worker-0")
        self.start_worker("worker-1")
        finished = {}
        # The baselines run in the same code path: per-rank global top-k
        # masks (fill-in) and raw-gradient top-k feeding AdamW.
        for optimizer in ("adams", "scape", "scape-global", "topk-adamw"):
            s = spec(optimizer, steps=30)
            s.placement.workers = 2
            s.optimizer.name = optimizer
            s.optimizer.learning_rate = 1e-3
            s.optimizer.scape.density = 0.1
            s.optimizer.scape.dense_warmup_steps = 5
            job_id = self.jobs.run(s)
            finished[optimizer] = self.jobs.wait_state(job_id, FINAL, timeout=120)
            self.assertEqual(finished[optimizer].state, job_pb2.SUCCEEDED,
                             finished[optimizer].state_reason)
            self.assertEqual(self.final_crc("worker-0", job_id), self.final_crc("worker-1", job_id))
        dense, sparse = finished["adams"].progress, finished["scape"].progress
        self.assertLess(sparse.loss, 5.0)
        self.assertLess(finished["topk-adamw"].progress.loss, 5.0)
        # 25 of 30 steps send ~10% of the values (plus masks) instead of all.
        self.assertLess(sparse.bytes_sent, 0.5 * dense.bytes_sent)
        # Two ranks' global top-k masks overlap only partly: their union is
        # larger than the partitioned mask's exact Σk.
        self.assertGreater(finished["scape-global"].progress.bytes_sent, sparse.bytes_sent)

    def test_scape_job_resumes_exactly_in_a_new_mask_epoch_after_kill(self):
        # Checkpoints follow residual syncs, so rank 0's checkpoint resumes
        # every rank, and the replacement continues the uninterrupted run:
        # for our rule, and for the authors' reference rule on a density
        # schedule, submitted from the CLI (killed inside the ramp).
        self.start_worker("worker-0")
        self.start_worker("worker-1")
        checkpoints = os.path.join(self.cluster.workdir, "ckpt")

        def scape_spec(name, rule):
            s = spec(name, steps=40, checkpoint_dir=os.path.join(checkpoints, rule),
                     checkpoint_interval=10)
            s.placement.workers = 2
            s.optimizer.name = "scape"
            s.optimizer.learning_rate = 1e-3
            s.optimizer.scape.density = 0.1
            if rule == "reference":
                s.optimizer.scape.rule = "reference"
                s.optimizer.scape.dense_small_tensors = True
                s.optimizer.scape.density_schedule.warmup_steps = 20
                s.optimizer.scape.density_schedule.shape = "linear"
            else:
                s.optimizer.scape.dense_warmup_steps = 3
            return s

        def submit_from_cli(s):
            path = os.path.join(self.cluster.workdir, f"{s.name}.json")
            with open(path, "w") as f:
                f.write(json_format.MessageToJson(s, preserving_proto_field_name=True))
            result = self.cluster.cli("submit", path, "--optimizer", "scape",
                                      "--scheduler", self.address)
            return result.stdout.strip().splitlines()[-1].rsplit(" ", 1)[-1]

        for rule in ("catch-up", "reference"):
            with self.subTest(rule=rule):
                uninterrupted = self.jobs.wait_state(
                    self.jobs.run(scape_spec(f"{rule}-uninterrupted", rule)), FINAL, timeout=120)
                self.assertEqual(uninterrupted.state, job_pb2.SUCCEEDED,
                                 uninterrupted.state_reason)
                self.assertEqual(uninterrupted.mask_epoch, 1)
                recovered = scape_spec(f"{rule}-recovered", rule)
                job_id = (submit_from_cli(recovered) if rule == "reference"
                          else self.jobs.run(recovered))
                job = self.kill_worker_1_after_checkpoint(job_id, 10)
                self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
                self.assertEqual(job.spec.optimizer.scape.rule,
                                 "reference" if rule == "reference" else "")
                self.assertGreaterEqual(job.recoveries, 1)
                self.assertEqual(job.mask_epoch, 1 + job.recoveries)
                self.assertEqual(job.mask_epoch_world_size, 2)
                self.assertEqual(self.final_crc("worker-0", job_id),
                                 self.final_crc("worker-2", job_id))
                # Bitwise: the parameters of the run that never stopped.
                self.assertEqual(self.final_crc("worker-0", job_id),
                                 self.final_crc("worker-0", uninterrupted.job_id))
                self.assertAlmostEqual(job.progress.loss, uninterrupted.progress.loss,
                                       delta=1e-5 * uninterrupted.progress.loss)
                # The next formulation starts again on worker-0 and worker-1.
                self.cluster.nodes["worker-2"].kill(signal.SIGKILL)
                self.cluster.wait_for_states({"worker-2": "DEAD"}, timeout=30)
                self.start_worker("worker-1")

    def test_kill_one_of_two_workers_recovers_on_a_replacement(self):
        self.start_worker("worker-0")
        self.start_worker("worker-1")
        checkpoints = os.path.join(self.cluster.workdir, "ckpt")
        s = spec("pair", steps=120, checkpoint_dir=checkpoints, checkpoint_interval=10)
        s.placement.workers = 2
        job_id = self.jobs.run(s)
        job = self.kill_worker_1_after_checkpoint(job_id, 20)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        self.assertGreaterEqual(job.generation, 2)
        self.assertEqual(sorted(job.assigned_nodes), ["worker-0", "worker-2"])

    def test_job_trains_reports_progress_and_succeeds(self):
        self.start_worker()
        job_id = self.jobs.run(spec("train", steps=60, eval_interval=20))
        events = []
        for event in self.jobs.watch(job_pb2.WatchJobRequest(job_id=job_id), timeout=120):
            events.append(event)
        states = [e.state for e in events if e.WhichOneof("body") == "state"]
        self.assertEqual(states[0], job_pb2.PENDING)
        self.assertIn(job_pb2.RUNNING, states)
        self.assertEqual(states[-1], job_pb2.SUCCEEDED)
        progress = [e.progress for e in events if e.WhichOneof("body") == "progress"]
        self.assertEqual([p.step for p in progress], list(range(1, 61)))
        job = self.jobs.job(job_id)
        self.assertEqual(job.progress.step, 60)
        self.assertLess(job.progress.loss, progress[0].loss - 1.0)
        self.assertGreater(job.progress.validation_loss, 0)
        self.assertGreater(job.progress.tokens_per_second, 0)
        # The job's own throughput: 60 steps of 64 × 4 tokens over their wall
        # time, which lies within the job's.
        self.assertEqual(job.progress.steps_timed, 60)
        self.assertEqual(job.progress.tokens_trained, 60 * 64 * 4)
        self.assertGreater(job.progress.steps_seconds, 0)
        self.assertLessEqual(job.progress.steps_seconds,
                             (job.finished_unix_ms - job.started_unix_ms) / 1000 + 0.1)
        # `corescape watch` of the finished job ends with that average.
        summary = self.cluster.cli("watch", job_id, "--scheduler", self.address).stdout
        average = round(job.progress.tokens_trained / job.progress.steps_seconds)
        self.assertIn(f", {average:,} tokens/s (average over 60 steps)\n", summary)
        # A replay from the start gives the same events (plots, reconnects).
        replay = list(self.jobs.watch(job_pb2.WatchJobRequest(job_id=job_id), timeout=30))
        self.assertEqual(len(replay), len(events))

    def test_kill_worker_mid_job_resumes_from_checkpoint_with_same_result(self):
        self.start_worker()
        reference = self.jobs.run(spec("reference", steps=80))
        reference_job = self.jobs.wait_state(reference, FINAL, timeout=120)
        self.assertEqual(reference_job.state, job_pb2.SUCCEEDED)

        checkpoints = os.path.join(self.cluster.workdir, "ckpt")
        job_id = self.jobs.run(spec("recovered", steps=80, checkpoint_dir=checkpoints,
                                    checkpoint_interval=10))
        harness.wait_for(lambda: self.jobs.job(job_id).progress.checkpoint_step >= 30, 120,
                         "a checkpoint at step 30", interval=0.02)
        self.cluster.nodes["worker-0"].kill(signal.SIGKILL)
        self.jobs.wait_state(job_id, (job_pb2.RECOVERING,), timeout=15)
        self.start_worker()  # the same name comes back: a replacement
        job = self.jobs.wait_state(job_id, FINAL, timeout=120)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        self.assertEqual(job.generation, 2)
        self.assertEqual(job.recoveries, 1)
        # Data order and optimizer state resume exactly.
        self.assertAlmostEqual(job.progress.loss, reference_job.progress.loss,
                               delta=1e-4 * reference_job.progress.loss)

    def test_restore_event_names_the_older_checkpoint_when_the_newest_fails_its_checksum(self):
        self.start_worker()
        checkpoints = os.path.join(self.cluster.workdir, "ckpt")
        s = spec("fallback", steps=400, checkpoint_dir=checkpoints, checkpoint_interval=10)
        job_id = self.jobs.run(s)
        harness.wait_for(lambda: self.jobs.job(job_id).progress.checkpoint_step >= 20, 120,
                         "a checkpoint at step 20", interval=0.02)
        self.cluster.nodes["worker-0"].kill(signal.SIGKILL)
        recovering = self.jobs.wait_state(job_id, (job_pb2.RECOVERING,), timeout=15)
        newest = recovering.progress.checkpoint_step
        self.assertIn(f"restarting from the newest checkpoint that verifies, up to step {newest}",
                      recovering.state_reason)
        # The checkpoint the scheduler would resume from fails its checksum.
        directory = os.path.join(checkpoints, job_id)
        steps = sorted(int(name[len("step-"):]) for name in os.listdir(directory)
                       if name.startswith("step-") and name[len("step-"):].isdigit())
        older = max(step for step in steps if step < newest)
        params = os.path.join(directory, f"step-{newest:012d}", "params")
        with open(params, "r+b") as f:
            f.seek(os.path.getsize(params) // 2)
            f.write(b"\xde\xad\xbe\xef")
        self.start_worker()
        expected = (f"restored checkpoint step {older}, not step {newest}: newer checkpoints "
                    "failed verification")
        for event in self.jobs.watch(job_pb2.WatchJobRequest(job_id=job_id), timeout=120):
            if event.WhichOneof("body") is None and event.message.startswith("restored"):
                self.assertEqual(event.message, expected)
                break
        else:
            self.fail("no restore event")
        self.assertEqual(self.jobs.job(job_id).state, job_pb2.RUNNING)
        self.jobs.cancel(job_pb2.CancelJobRequest(job_id=job_id, reason="test done"), timeout=5)

    def test_scheduler_restart_mid_job(self):
        self.start_worker()
        job_id = self.jobs.run(spec("survives", steps=300))
        harness.wait_for(lambda: self.jobs.job(job_id).progress.step >= 20, 60, "step 20",
                         interval=0.05)
        address = self.cluster.scheduler_address
        self.cluster.scheduler.kill(signal.SIGTERM)
        self.cluster.scheduler.wait(timeout=10)
        self.jobs.channel.close()
        self.cluster.start_scheduler(listen=address)
        self.jobs = Jobs(self.cluster.channel())
        job = self.jobs.wait_state(job_id, FINAL, timeout=180)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        self.assertEqual(job.generation, 1)  # not restarted: the worker kept going

    def test_cancel_frees_the_worker(self):
        self.start_worker()
        job_id = self.jobs.run(spec("long", steps=100000))
        harness.wait_for(lambda: self.jobs.job(job_id).progress.step >= 3, 60, "step 3",
                         interval=0.05)
        self.jobs.cancel(job_pb2.CancelJobRequest(job_id=job_id, reason="test"), timeout=5)
        self.assertEqual(self.jobs.job(job_id).state, job_pb2.CANCELLED)
        step_at_cancel = self.jobs.job(job_id).progress.step
        next_id = self.jobs.run(spec("next", steps=20))
        job = self.jobs.wait_state(next_id, FINAL, timeout=60)
        self.assertEqual(job.state, job_pb2.SUCCEEDED)
        time.sleep(0.5)
        self.assertLess(self.jobs.job(job_id).progress.step - step_at_cancel, 50)
        self.assertIn("stopping job", self.cluster.nodes["worker-0"].log())

    def test_checkpoints_outside_the_workers_roots_are_refused_not_recovered(self):
        """The workers report their --checkpoint_root when they register: a
        directory outside every root is refused at submit, and one outside
        some roots is placed only on workers whose root holds it; it waits
        PENDING saying why instead of failing five recoveries."""
        root = os.path.join(self.cluster.workdir, "root")
        other_root = os.path.join(self.cluster.workdir, "other-root")
        for name, node_root in (("worker-0", root), ("worker-1", other_root)):
            self.cluster.start_node(name, harness.WORKER,
                                    ["--collective_timeout=5s", "--threads=1",
                                     f"--checkpoint_root={node_root}"])
        self.cluster.wait_for_states({"worker-0": "ALIVE", "worker-1": "ALIVE"}, timeout=20)
        outside = os.path.join(self.cluster.workdir, "elsewhere")
        with self.assertRaises(grpc.RpcError) as raised:
            self.jobs.run(spec("outside", steps=20, checkpoint_dir=outside,
                               checkpoint_interval=5))
        self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        details = raised.exception.details()
        self.assertIn(f"spec.checkpoint.directory: {outside}", details)
        for node_root in (root, other_root):
            self.assertIn(os.path.realpath(node_root), details)
        self.assertFalse(os.path.exists(outside))

        # Two workers wanted, one root holds the directory: it waits, named.
        inside = os.path.join(root, "ckpt")
        job_id = self.jobs.run(spec("two", steps=10, workers=2, checkpoint_dir=inside,
                                    checkpoint_interval=5))
        reason = (f"checkpoint.directory {inside} is outside the checkpoint root of 1 of them "
                  f"({os.path.realpath(other_root)}")
        job = harness.wait_for(lambda: (lambda j: j if reason in j.state_reason else None)(
            self.jobs.job(job_id)), 20, "the PENDING reason", interval=0.1)
        self.assertEqual(job.state, job_pb2.PENDING)
        time.sleep(1.0)
        job = self.jobs.job(job_id)
        self.assertEqual((job.state, job.recoveries, job.generation), (job_pb2.PENDING, 0, 0))
        for name in ("worker-0", "worker-1"):
            self.assertNotIn("outside this worker's checkpoint root",
                             self.cluster.nodes[name].log())
        self.jobs.cancel(job_pb2.CancelJobRequest(job_id=job_id, reason="test"), timeout=5)

        # One worker: the one whose root holds it trains and checkpoints.
        job_id = self.jobs.run(spec("inside", steps=10, checkpoint_dir=inside,
                                    checkpoint_interval=5))
        job = self.jobs.wait_state(job_id, FINAL, timeout=120)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        self.assertEqual(list(job.assigned_nodes), ["worker-0"])
        self.assertTrue(os.path.isdir(os.path.join(inside, job_id)))

    def test_job_waits_pending_for_enough_workers(self):
        self.start_worker()
        job_id = self.jobs.run(spec("needs-two", steps=10, workers=2))
        time.sleep(1.0)
        job = self.jobs.job(job_id)
        self.assertEqual(job.state, job_pb2.PENDING)
        self.assertIn("waiting for 2", job.state_reason)

    def test_invalid_specs_name_the_field(self):
        # A registered worker reports its data root (TMP): datasets outside
        # it are refused at submit.
        self.start_worker()
        for mutate, field in [
            (lambda s: setattr(s, "steps", 0), "spec.steps"),
            (lambda s: setattr(s.model, "rope_theta", float("nan")),
             "spec.model.rope_theta: must be finite and > 1, got nan"),
            (lambda s: setattr(s.model, "norm_eps", -1),
             "spec.model.norm_eps: must be in (0, 1), got -1"),
            (lambda s: setattr(s, "name", "job\n\x1b[31mFAKE\u202e"),
             "spec.name: holds a control"),
            (lambda s: s.data.train_shards.__setitem__(0, "/etc/shadow"),
             "spec.data.train_shards[0]: /etc/shadow is outside the data root of every registered"),
            (lambda s: s.data.train_shards.__setitem__(0, "/dev/zero"),
             "spec.data.train_shards[0]"),
            (lambda s: s.data.train_shards.__setitem__(0, "/proc/self/mem"),
             "spec.data.train_shards[0]"),
            (lambda s: s.data.train_shards.__setitem__(0, "../../etc/passwd"),
             "spec.data.train_shards[0]"),
            (lambda s: s.data.train_shards.extend(["/d"] * 100000),
             "spec.data.train_shards: 100001 datasets, more than a job may name (256)"),
            (lambda s: setattr(s.model, "preset", "huge"), "spec.model.preset"),
            (lambda s: setattr(s.model, "n_kv_heads", 3), "n_kv_heads"),
            (lambda s: setattr(s.data, "sequence_length", 10**6), "spec.data.sequence_length"),
            (lambda s: s.data.train_shards.__setitem__(0, "/nope"), "spec.data.train_shards[0]"),
            (lambda s: setattr(s.placement, "workers", 100000), "spec.placement.workers"),
            (lambda s: setattr(s.checkpoint, "directory", "relative/ckpt"),
             "spec.checkpoint.directory"),
            (lambda s: setattr(s.checkpoint, "directory", "/tmp/ok/../../etc"),
             "spec.checkpoint.directory"),
            (lambda s: s.placement.node_names.extend(["w", "w"]) or
             setattr(s.placement, "workers", 2), "spec.placement.node_names[1]"),
        ]:
            s = spec("bad", steps=10)
            mutate(s)
            with self.assertRaises(grpc.RpcError) as raised:
                self.jobs.run(s)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, field)
            self.assertIn(field, raised.exception.details())


if __name__ == "__main__":
    unittest.main(verbosity=2)
