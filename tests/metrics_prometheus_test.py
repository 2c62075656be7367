"""Prometheus metrics end to end: a real Prometheus server (Debian's
/usr/bin/prometheus) scrapes every daemon of a `corescape cluster up`
cluster while a DISAGGREGATED job trains, and its HTTP API shows the steps
rising on every rank, the job's loss, SCAPE's density and mask bytes,
checkpoint write times, the nodes, the attention server's work and traffic,
and the scheduler's RPCs; and, with --http_tls, that it scrapes over HTTPS
with a cluster certificate and is refused without one."""

import json
import math
import os
import subprocess
import time
import unittest
import urllib.parse

import cluster_harness as harness
import ops_cluster

PROMETHEUS = "/usr/bin/prometheus"


class Prometheus:
    """A Prometheus server scraping `targets` ({daemon name: HOST:PORT})
    every 500 ms, once per job of `jobs` ({job name: None for plain HTTP, or
    a tls_config {"ca_file": ..., "cert_file": ..., "key_file": ...} for
    HTTPS})."""

    def __init__(self, workdir, targets, jobs=None):
        ops_cluster.require(PROMETHEUS, "prometheus")
        os.makedirs(workdir, exist_ok=True)
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n"
                    "scrape_configs:\n")
            for job, tls in sorted((jobs or {"corescape": None}).items()):
                f.write(f"  - job_name: {job}\n")
                if tls is not None:
                    f.write("    scheme: https\n    tls_config:\n")
                    for key, value in sorted(tls.items()):
                        f.write(f"      {key}: '{value}'\n")
                f.write("    static_configs:\n")
                for name, address in sorted(targets.items()):
                    f.write(f"      - targets: ['{address}']\n"
                            f"        labels: {{daemon: '{name}'}}\n")
        self.log_path = os.path.join(workdir, "prometheus.log")
        # A port picked here can be taken before Prometheus binds it: retry.
        for attempt in range(5):
            self.address = f"127.0.0.1:{harness.free_port()}"
            with open(self.log_path, "ab") as log:
                self.process = subprocess.Popen(
                    [PROMETHEUS, f"--config.file={config}",
                     f"--storage.tsdb.path={os.path.join(workdir, f'data-{attempt}')}",
                     f"--web.listen-address={self.address}", "--log.level=warn"],
                    stdout=log, stderr=log, stdin=subprocess.DEVNULL)
            try:
                harness.wait_for(self.ready, 60, "Prometheus to be ready", interval=0.2)
                return
            except AssertionError:
                self.stop()
                if "address already in use" not in self.log():
                    raise AssertionError("Prometheus did not start:\n" + self.log())
        raise AssertionError("Prometheus found no free port:\n" + self.log())

    def ready(self):
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited {self.process.returncode}:\n{self.log()}")
        try:
            return ops_cluster.http("GET", f"http://{self.address}/-/ready", timeout=2)[0] == 200
        except OSError:
            return False

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def query(self, promql):
        """The instant vector as [(labels, value)]."""
        answer = ops_cluster.get_json(f"http://{self.address}/api/v1/query?" +
                                      urllib.parse.urlencode({"query": promql}))
        assert answer["status"] == "success", answer
        return [(r["metric"], float(r["value"][1])) for r in answer["data"]["result"]]

    def value(self, promql):
        """The single value of a query, None while it has none."""
        result = self.query(promql)
        return result[0][1] if len(result) == 1 else None

    def wait_value(self, promql, predicate, what, timeout=60):
        return harness.wait_for(
            lambda: (lambda v: v if v is not None and predicate(v) else None)(self.value(promql)),
            timeout, what, interval=0.25)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class MetricsPrometheusTest(ops_cluster.OpsClusterTestCase):

    def setUp(self):
        super().setUp()
        self.prometheus = None

    def tearDown(self):
        if self.prometheus:
            self.prometheus.stop()
        super().tearDown()

    def extra_logs(self):
        return "===== prometheus =====\n" + self.prometheus.log() if self.prometheus else ""

    def test_prometheus_scrapes_every_daemon_during_a_job(self):
        daemons = self.cluster.up(workers=2, attention_servers=1)
        self.assertEqual(sorted(daemons), ["attn-0", "scheduler", "worker-0", "worker-1"])
        self.prometheus = Prometheus(os.path.join(harness.TMP, "prometheus"),
                                     {name: self.cluster.metrics_address(name) for name in daemons})
        density = 0.25
        job = self.cluster.submit_disaggregated(
            "scraped", steps=2000, scape_density=density,
            checkpoint_dir=os.path.join(harness.TMP, "prometheus-checkpoints"))
        self.cluster.wait_for_step(job, 1)

        # Every daemon is scraped, and each says what it is.
        p = self.prometheus
        harness.wait_for(lambda: len([v for _, v in p.query('up{job="corescape"}') if v == 1]) == 4,
                         60, "all four daemons up in Prometheus", interval=0.25)
        builds = {m["daemon"]: m for m, _ in p.query("corescape_build_info")}
        self.assertEqual(sorted(builds), ["attn-0", "scheduler", "worker-0", "worker-1"])
        self.assertEqual(len(p.query("corescape_process_resident_memory_bytes > 0")), 4)
        for node in ("worker-0", "worker-1", "attn-0"):
            self.assertEqual(p.wait_value(f'corescape_node_registered{{node="{node}"}}',
                                          lambda v: v == 1, f"{node} registered"), 1)

        # The scheduler's view: nodes by role and state, the job running.
        self.assertEqual(p.value('corescape_scheduler_nodes{role="WORKER",state="ALIVE"}'), 2)
        self.assertEqual(
            p.value('corescape_scheduler_nodes{role="ATTENTION_SERVER",state="ALIVE"}'), 1)
        self.assertEqual(p.wait_value('corescape_scheduler_jobs{state="RUNNING"}',
                                      lambda v: v == 1, "one job running"), 1)
        self.assertGreaterEqual(p.value(
            'sum(corescape_scheduler_rpcs_total{method="corescape.v1.NodeService/Register",'
            'code="OK"})'), 3)
        self.assertIsNotNone(p.value('corescape_scheduler_lease_expiries_total'))

        # Step counters rise, scrape after scrape, on rank 0 (which reports
        # its steps) and on rank 1 (which reports none).
        job_step = f'corescape_job_step{{job_id="{job}"}}'
        first_step = p.wait_value(job_step, lambda v: v >= 1, "the job's step")
        p.wait_value(job_step, lambda v: v >= first_step + 3, "the job's step to rise")
        for worker in ("worker-0", "worker-1"):
            worker_steps = f'corescape_worker_steps_total{{job_id="{job}",daemon="{worker}"}}'
            first_count = p.wait_value(worker_steps, lambda v: v >= 1, f"{worker}'s steps")
            p.wait_value(worker_steps, lambda v: v >= first_count + 3, f"{worker}'s steps to rise")

        # SCAPE: each rank synchronizes the job's density (after the first,
        # dense step) and sends mask bytes.
        for worker in ("worker-0", "worker-1"):
            p.wait_value(f'corescape_worker_gradient_density{{job_id="{job}",daemon="{worker}"}}',
                         lambda v: abs(v - density) < 0.01, f"{worker} at the job's density")
            p.wait_value(f'corescape_worker_mask_bytes_total{{job_id="{job}",daemon="{worker}"}}',
                         lambda v: v > 0, f"{worker}'s mask bytes")

        # Rank 0 writes the checkpoints, each one timed.
        checkpoints = (f'corescape_worker_checkpoint_write_seconds_count'
                       f'{{job_id="{job}",daemon="worker-0"}}')
        first_writes = p.wait_value(checkpoints, lambda v: v >= 1, "a checkpoint written")
        p.wait_value(checkpoints, lambda v: v > first_writes, "another checkpoint written")

        # The job's loss: from the scheduler and from rank 0 itself.
        for query in (f'corescape_job_loss{{job_id="{job}"}}',
                      f'corescape_worker_loss{{job_id="{job}",daemon="worker-0"}}'):
            loss = p.wait_value(query, lambda v: True, query)
            self.assertTrue(math.isfinite(loss) and 0 < loss < 20, (query, loss))
        # Its model FLOP rate per worker; no MFU, these CPUs having no known peak.
        p.wait_value(f'corescape_job_model_tflops_per_second{{job_id="{job}"}}',
                     lambda v: 0 < v < 100, "the job's model TFLOP/s")
        self.assertEqual(p.query(f'corescape_job_mfu{{job_id="{job}"}}'), [])
        for worker in ("worker-0", "worker-1"):
            p.wait_value(f'corescape_worker_model_tflops_per_second'
                         f'{{job_id="{job}",daemon="{worker}"}}',
                         lambda v: 0 < v < 100, f"{worker}'s model TFLOP/s")
        p.wait_value(f'corescape_job_validation_loss{{job_id="{job}"}}',
                     lambda v: 0 < v < 20, "a validation loss", timeout=90)
        self.assertGreater(p.wait_value(f'corescape_job_bytes_sent_total{{job_id="{job}"}}',
                                        lambda v: v > 0, "bytes sent"), 0)

        # The attention server's work and the scheduler's plans for it.
        p.wait_value(f'corescape_attention_server_micro_batches_total{{job_id="{job}"}}',
                     lambda v: v > 0, "attention micro-batches")
        p.wait_value(f'corescape_attention_server_flops_total{{job_id="{job}"}}',
                     lambda v: v > 0, "attention FLOPs")
        for direction in ("received", "sent"):
            p.wait_value(f'corescape_attention_server_bytes_{direction}_total{{job_id="{job}"}}',
                         lambda v: v > 0, f"attention bytes {direction}")
        # Requests held unanswered: between none and one per worker.
        p.wait_value(f'corescape_attention_server_queue_depth{{job_id="{job}"}}',
                     lambda v: 0 <= v <= 2, "the attention queue depth")
        imbalance = p.wait_value(f'corescape_scheduler_attention_plan_imbalance{{job_id="{job}"}}',
                                 lambda v: v > 0, "an attention plan")
        self.assertGreaterEqual(imbalance, 1.0)
        self.cluster.cancel(job)

    def test_prometheus_scrapes_over_https_with_a_cluster_certificate(self):
        workdir = os.path.join(harness.TMP, "https")
        cluster = harness.Cluster(workdir)
        self.addCleanup(cluster.stop_all)
        port_file = os.path.join(workdir, "metrics.port")
        cluster.start_scheduler(extra_args=["--http_tls", "--metrics_listen=127.0.0.1:0",
                                            f"--metrics_port_file={port_file}"])
        with open(port_file) as f:
            address = f.read().strip()
        tls = os.path.join(workdir, "tls")
        ca_only = {"ca_file": os.path.join(tls, "ca.crt")}
        with_certificate = {**ca_only, "cert_file": os.path.join(tls, "operator.crt"),
                            "key_file": os.path.join(tls, "operator.key")}
        self.prometheus = Prometheus(os.path.join(workdir, "prometheus"), {"scheduler": address},
                                     {"corescape": with_certificate, "no_certificate": ca_only,
                                      "plain_http": None})
        p = self.prometheus
        p.wait_value('up{job="corescape"}', lambda v: v == 1, "the HTTPS scrape up")
        self.assertEqual([m["daemon"] for m, _ in p.query('corescape_build_info')], ["scheduler"])
        # Down: the handshake fails without a certificate, and plain HTTP is
        # no TLS handshake at all.
        for job in ("no_certificate", "plain_http"):
            harness.wait_for(lambda: p.value(f'up{{job="{job}"}}') == 0, 60, f"{job} down",
                             interval=0.25)


if __name__ == "__main__":
    unittest.main(verbosity=2)
