"""The scheduler's status page end to end: headless Chromium (Debian's
/usr/bin/chromium) loads the real page from a `corescape cluster up`
cluster while a DISAGGREGATED job trains; the DOM it builds from the JSON
endpoints shows the nodes, the job with its progress and loss curve and the
attention plan; a screenshot goes to the test's outputs. Unknown paths get
404, and no request of any method changes the scheduler's state."""

import html.parser
import json
import os
import subprocess
import time
import unittest

import cluster_harness as harness
import ops_cluster

CHROMIUM = "/usr/bin/chromium"
OUTPUTS = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", harness.TMP)


class Elements(html.parser.HTMLParser):
    """Every element's attributes, by tag."""

    def __init__(self, text):
        super().__init__()
        self.elements = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def find(self, tag, **attrs):
        return [a for t, a in self.elements
                if t == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def chromium(*args):
    """Runs headless Chromium; the virtual-time budget lets the page's
    fetches and first refreshes finish before the DOM or screenshot is
    taken."""
    ops_cluster.require(CHROMIUM, "chromium")
    profile = os.path.join(harness.TMP, "chromium-profile")
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--disable-extensions", "--disable-background-networking",
         f"--user-data-dir={profile}", "--virtual-time-budget=8000", *args],
        capture_output=True, text=True, timeout=180)
    if result.returncode != 0:
        raise AssertionError(f"chromium exited {result.returncode}:\n{result.stderr[-5000:]}")
    return result.stdout


class StatusPageChromiumTest(ops_cluster.OpsClusterTestCase):

    def snapshot(self):
        """What the scheduler holds, minus what moves by itself (heartbeat
        and lease times)."""
        c, jobs = self.cluster, self.cluster.jobs
        nodes = json.loads(c.corescape("nodes", "--json", "--scheduler", c.scheduler_address))
        status = json.loads(c.corescape("status", "--json", "--scheduler", c.scheduler_address))
        listed = json.loads(c.corescape("jobs", "--json", "--scheduler", c.scheduler_address))
        events = ops_cluster.get_json(
            f"{c.status_url}api/job/events?id={self.job}&limit=5000")["events"]
        return {
            "nodes": sorted((n["name"], n["state"], n["incarnation"], n["current_job_id"])
                            for n in nodes),
            "counts": {k: v for k, v in status.items() if k not in ("recent_events", "uptime_ms")},
            "cluster_events": [e.get("sequence") for e in status.get("recent_events", [])],
            "jobs": json.dumps(listed, sort_keys=True),
            "job_events": len(events),
        }

    def test_page_shows_the_cluster_and_the_job_and_serves_nothing_else(self):
        daemons = self.cluster.up(workers=2, attention_servers=1)
        url = self.cluster.status_url
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/$")
        self.job = self.cluster.submit_disaggregated("page", steps=2000)
        self.cluster.wait_for_step(self.job, 12)  # two validations done

        dom = chromium("--dump-dom", url)
        page = Elements(dom)
        for name in ("worker-0", "worker-1", "attn-0"):
            # Every node of the running job shows its id in the job column.
            self.assertTrue(page.find("tr", data_node=name, data_state="ALIVE",
                                      data_job=self.job), (name, dom))
        jobs = page.find("div", **{"class": "job", "data_job": self.job})
        self.assertEqual(len(jobs), 1, dom)
        self.assertEqual(jobs[0]["data-state"], "RUNNING")
        self.assertGreaterEqual(int(jobs[0]["data-step"]), 12)
        curves = page.find("svg", **{"class": "loss", "data_job": self.job})
        self.assertEqual(len(curves), 1, dom)
        self.assertGreaterEqual(int(curves[0]["data-train-points"]), 12)
        self.assertGreaterEqual(int(curves[0]["data-val-points"]), 2)
        self.assertTrue(page.find("polyline", **{"class": "train"}), dom)
        self.assertGreaterEqual(len(page.find("circle", **{"class": "val"})), 2, dom)
        plans = page.find("div", **{"class": "plan", "data_job": self.job})
        self.assertEqual(len(plans), 1, dom)
        self.assertEqual(plans[0]["data-servers"], "1")
        self.assertGreaterEqual(float(plans[0]["data-imbalance"]), 1.0)
        self.assertTrue(page.find("div", data_server="attn-0"), dom)
        self.assertIn("NODE_REGISTERED", dom)  # recent events
        self.assertIn('<div id="error"></div>', dom)  # no refresh failed

        screenshot = os.path.join(OUTPUTS, "status_page.png")
        chromium(f"--screenshot={screenshot}", "--window-size=1280,1400", url)
        with open(screenshot, "rb") as f:
            png = f.read()
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG")
        self.assertGreater(len(png), 10000, "an empty page?")

        # Unknown paths: 404, also for what would look like actions.
        for path in ("nothing", "api/nothing", "api/jobs/extra", "metrics", "api/drain",
                     "api/cancel", "api/submit", "api/rebalance", "../etc/passwd",
                     "api/job?id=job-999"):
            self.assertEqual(ops_cluster.http("GET", url + path)[0], 404, path)

        # Once the job has ended the scheduler's state holds still: every
        # method on every path, with bodies, leaves it as it was.
        self.cluster.cancel(self.job)
        before = harness.wait_for(
            lambda: (lambda a, b: a if a == b else None)(self.snapshot(), self.snapshot()),
            60, "the cluster to settle after the cancel", interval=0.5)
        spec = json.dumps({"spec": {"name": "injected", "steps": 1}}).encode()
        paths = ["", "api/status", "api/nodes", "api/jobs", f"api/job?id={self.job}",
                 f"api/job/events?id={self.job}", f"api/attention_plan?id={self.job}",
                 "api/drain?name=worker-0", f"api/cancel?id={self.job}", "api/jobs/submit",
                 "api/rebalance"]
        for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
            for path in paths:
                status, _ = ops_cluster.http(method, url + path,
                                             body=spec if method in ("POST", "PUT", "PATCH")
                                             else None)
                if method in ("GET", "HEAD"):
                    self.assertIn(status, (200, 404), (method, path))
                else:
                    self.assertIn(status, (404, 405), (method, path, status))
        chromium("--dump-dom", url)  # the page's own requests, once more
        time.sleep(1)
        self.assertEqual(self.snapshot(), before)
        self.assertNotIn("injected", json.dumps(before["jobs"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
