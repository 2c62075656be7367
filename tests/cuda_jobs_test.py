"""`device: cuda` jobs on a cluster of real daemons without GPUs: the CUDA
job waits PENDING with a reason naming the missing GPU (job status, the
`corescape jobs` listing, its events) while a CPU job on the same cluster
trains; a worker asked to serve a GPU this machine lacks refuses to start."""

import json
import os
import subprocess
import unittest

import grpc

import cluster_harness as harness
from corescape.v1 import common_pb2, job_pb2
from jobs_e2e_test import FINAL, JobClusterTestCase, spec

MISSING_GPU = ("waiting for 2 healthy free workers with a CUDA GPU (device: cuda; 0 free now); "
               "0 of 2 registered workers serve one (start corescape-worker --device=cuda:N)")


class CudaJobsTest(JobClusterTestCase):

    # A stand-in peak for these CPUs, so the CPU job reports an MFU.
    PEAK_TFLOPS = 0.5

    def start_worker(self, name):
        self.cluster.start_node(name, harness.WORKER, ["--collective_timeout=5s", "--threads=1",
                                                       f"--peak_tflops={self.PEAK_TFLOPS}"])

    def pending_events(self, job_id):
        """The job's PENDING events' messages so far (the watch stream stays
        open for a waiting job: read until the deadline)."""
        messages = []
        try:
            for event in self.jobs.watch(job_pb2.WatchJobRequest(job_id=job_id), timeout=3):
                if event.WhichOneof("body") == "state" and event.state == job_pb2.PENDING:
                    messages.append(event.message)
        except grpc.RpcError as error:
            self.assertEqual(error.code(), grpc.StatusCode.DEADLINE_EXCEEDED, error)
        return messages

    def test_cuda_job_waits_for_a_gpu_while_a_cpu_job_trains(self):
        self.start_worker("worker-0")
        self.start_worker("worker-1")
        nodes = self.cluster.wait_for_states({"worker-0": "ALIVE", "worker-1": "ALIVE"},
                                             timeout=20)
        for name in ("worker-0", "worker-1"):
            self.assertEqual(nodes[name]["device"], "cpu")
            self.assertEqual(nodes[name]["resources"]["device"], {"kind": "cpu"})

        cuda = spec("needs-gpus", steps=5, workers=2)
        cuda.device = common_pb2.CUDA
        cuda_id = self.jobs.run(cuda)
        harness.wait_for(lambda: self.jobs.job(cuda_id).state_reason == MISSING_GPU, 20,
                         "the CUDA job's reason", interval=0.1)

        cpu_id = self.jobs.run(spec("on-cpus", steps=5, workers=2))
        done = self.jobs.wait_state(cpu_id, FINAL, timeout=180)
        self.assertEqual(done.state, job_pb2.SUCCEEDED, done.state_reason)
        self.assertEqual(done.spec.device, common_pb2.CPU)
        # Its steps' model FLOP rate, and the MFU against the workers' peak.
        rate = done.progress.model_tflops_per_second
        self.assertGreater(rate, 0)
        self.assertAlmostEqual(done.progress.mfu, rate / self.PEAK_TFLOPS, delta=1e-9 * rate)
        details = self.cluster.cli("job", cpu_id, "--scheduler", self.address).stdout
        self.assertRegex(details, r"\nCompute: +[0-9.e-]+ TFLOP/s per worker, MFU [0-9.]+%\n")

        # Still waiting, for the same reason, after a CPU job came and went.
        job = self.jobs.job(cuda_id)
        self.assertEqual(job.state, job_pb2.PENDING)
        self.assertEqual(job.spec.device, common_pb2.CUDA)
        self.assertEqual(job.state_reason, MISSING_GPU)
        self.assertFalse(job.assigned_nodes)
        self.assertIn(MISSING_GPU, self.pending_events(cuda_id))
        # Seen from the CLI: the listing says why, the status names the device.
        listing = self.cluster.cli("jobs", "--scheduler", self.address).stdout
        self.assertRegex(listing, rf"\n{cuda_id} +needs-gpus +PENDING +cuda ")
        self.assertIn(f"{cuda_id}: {MISSING_GPU}\n", listing)
        status = self.cluster.cli("job", cuda_id, "--scheduler", self.address).stdout
        self.assertIn(f"Reason:       {MISSING_GPU}\n", status)
        self.assertIn("Device:       cuda\n", status)
        listed = json.loads(self.cluster.cli("jobs", "--json", "--scheduler",
                                             self.address).stdout)
        by_id = {j["job_id"]: j for j in listed}
        self.assertEqual(by_id[cuda_id]["spec"]["device"], "CUDA")
        self.assertEqual(by_id[cuda_id]["state_reason"], MISSING_GPU)

    def test_worker_refuses_to_serve_a_gpu_it_does_not_have(self):
        # The default build has no CUDA; a --config=cuda build on a machine
        # without GPU N refuses likewise ("no such GPU").
        for flag, message in (("--device=cuda:0", "--device=cuda:0: "),
                              ("--device=gpu", "--device: device 'gpu': unknown kind"),
                              ("--peak_tflops=-1", "--peak_tflops=-1: a dense peak is a number")):
            name = "w-" + "".join(c for c in flag if c.isalnum())
            worker = self.cluster.start_node(name, harness.WORKER, [flag])
            self.assertEqual(worker.wait(timeout=30), 2, worker.log())
            self.assertIn(message, worker.log())
            self.assertFalse(os.path.exists(worker.port_file), "it never served")
        # Nothing registered.
        self.assertEqual(self.cluster.nodes_json(), {})


if __name__ == "__main__":
    unittest.main()
