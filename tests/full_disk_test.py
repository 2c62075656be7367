"""The scheduler on a disk that fills up mid-job (a real ENOSPC: its state
directory is a small tmpfs, filled with a file): a worker killed meanwhile
is DEAD at once, the job is not recovered before that can be recorded, and
once space is freed the job recovers onto a spare and succeeds, with the
dead node recorded DEAD across a scheduler restart."""

import errno
import os
import signal
import subprocess
import unittest

import cluster_harness as harness
from corescape.v1 import job_pb2
from jobs_e2e_test import FINAL, JobClusterTestCase, Jobs, spec


def fill(path):
    """Writes `path` until the filesystem is full; returns the bytes written."""
    written = 0
    chunk = b"\0" * (64 << 10)
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
    # The last partial block: byte by byte is too slow, 4 KiB is fine grained enough.
    with open(path, "ab", buffering=0) as f:
        try:
            while True:
                written += f.write(b"\0" * 4096)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    return written


class FullDiskTest(JobClusterTestCase):

    def setUp(self):
        if os.geteuid() != 0:
            self.fail("needs root: mounts a small tmpfs as the scheduler's state directory")
        workdir = os.path.join(harness.TMP, self.id().split(".")[-1])
        self.state_dir = os.path.join(workdir, "scheduler-state")
        os.makedirs(self.state_dir, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", self.state_dir],
                       check=True)
        self.filler = os.path.join(self.state_dir, "filler")
        super().setUp()
        self.assertEqual(self.cluster.state_dir, self.state_dir)

    def tearDown(self):
        try:
            super().tearDown()
        finally:
            subprocess.run(["umount", "-l", self.state_dir], check=False)

    def start_worker(self, name):
        self.cluster.start_node(name, harness.WORKER, ["--collective_timeout=5s", "--threads=1"])
        self.cluster.wait_for_states({name: "ALIVE"}, timeout=20)

    def refused_writes(self):
        return self.cluster.scheduler.log().count("cannot persist job")

    def test_job_recovers_and_succeeds_once_the_disk_has_space_again(self):
        self.start_worker("worker-0")
        self.start_worker("worker-1")
        s = spec("full-disk", steps=120, checkpoint_dir=os.path.join(self.cluster.workdir, "ckpt"),
                 checkpoint_interval=10)
        s.placement.workers = 2
        job_id = self.jobs.run(s)
        self.jobs.wait_state(job_id, (job_pb2.RUNNING,), timeout=30)
        self.start_worker("worker-2")  # the spare
        harness.wait_for(lambda: self.jobs.job(job_id).progress.checkpoint_step >= 20, 120,
                         "a checkpoint at step 20", interval=0.02)

        self.assertGreater(fill(self.filler), 0)
        before = self.refused_writes()
        self.cluster.nodes["worker-1"].kill(signal.SIGKILL)
        # DEAD from memory, though the disk refuses to record it.
        self.cluster.wait_for_states({"worker-1": "DEAD"}, timeout=30)
        # Several reconcile passes refuse the recovery's write...
        harness.wait_for(lambda: self.refused_writes() >= before + 5, 30,
                         "refused state writes in the scheduler's log", interval=0.1)
        job = self.jobs.job(job_id)
        # ...so nothing moved: no recovery counted, no new generation sent.
        self.assertEqual(job.generation, 1, job.state_reason)
        self.assertEqual(job.recoveries, 0, job.state_reason)
        self.assertNotIn("worker-2", job.assigned_nodes)

        os.unlink(self.filler)
        job = self.jobs.wait_state(job_id, FINAL, timeout=240)
        self.assertEqual(job.state, job_pb2.SUCCEEDED, job.state_reason)
        self.assertGreaterEqual(job.generation, 2)
        self.assertEqual(sorted(job.assigned_nodes), ["worker-0", "worker-2"])

        # What was decided while the disk was full is on disk now.
        self.jobs.channel.close()
        self.address = self.cluster.start_scheduler()
        self.jobs = Jobs(self.cluster.channel())
        self.assertEqual(self.jobs.job(job_id).state, job_pb2.SUCCEEDED)
        self.assertEqual(self.cluster.nodes_json()["worker-1"]["state"], "DEAD")


if __name__ == "__main__":
    unittest.main()
