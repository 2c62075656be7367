"""P-rank SCAPE over the real data plane equals the in-process P-rank mode bitwise.

One corpus (made here, prepared with corescape-data), one configuration
(tiny model, same seeds, a dense warm-up, then sparse steps), run twice:

  * corescape-scape-train: P ranks as threads of one process, meeting in
    InProcessHubs (runtime/optim), which sum in the data plane's order;
  * corescape-scape-rank x P: one process per rank on loopback, the
    optimizer's collectives through the worker's CommunicatorGroup over UCX
    (runtime/comm), a second communicator for losses and token counts.

Checked: every process ends with bitwise the same parameters, first moment
and last-sync steps as each other and as the in-process run; rank r's
residual (local state) equals in-process rank r's and differs from the other
ranks'; every step's training loss and the validation losses are the same
bits; and the data plane's byte counters show the sparse steps moving a small
fraction of a dense step (the dense steps exactly a ring all-reduce).
"""
import json
import os
import random
import subprocess
import tempfile
import unittest

if "TEST_SRCDIR" in os.environ:
    ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
else:  # run by hand from the source tree after bazel build
    ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bazel-bin")
DATA_TOOL = os.path.join(ROOT, "tools", "data", "corescape-data")
TRAIN = os.path.join(ROOT, "tools", "scape", "corescape-scape-train")
RANK = os.path.join(ROOT, "tools", "scape", "corescape-scape-rank")

WORK = tempfile.mkdtemp(prefix="scape-dp-", dir=os.environ.get("TEST_TMPDIR"))
TIMEOUT_S = 120


def make_dataset():
    """~600 fortune-like documents of pseudo-random words, prepared once."""
    corpus = os.path.join(WORK, "corpus")
    os.makedirs(corpus, exist_ok=True)
    rng = random.Random(7)
    words = ["the", "a", "cat", "dog", "sees", "runs", "over", "under", "quick", "lazy",
             "moon", "river", "light", "stone", "and", "never", "always", "old", "new", "sky"]
    with open(os.path.join(corpus, "fortunes"), "w") as f:
        for _ in range(600):
            n = rng.randint(4, 40)
            text = " ".join(rng.choice(words) for _ in range(n))
            f.write(text.capitalize() + ".\n%\n")
    out = os.path.join(WORK, "data")
    subprocess.run([DATA_TOOL, "prepare", "--input=" + corpus, "--delimiter=%",
                    "--output=" + out], check=True, stdout=subprocess.DEVNULL,
                   timeout=TIMEOUT_S)
    return out


DATA = make_dataset()


def training_flags(world, density, warmup, steps):
    return ["--data=" + DATA, "--model=tiny", "--ranks=%d" % world, "--micro_batch=2",
            "--seq_len=64", "--steps=%d" % steps, "--lr=2e-3", "--lr_warmup=%d" % warmup,
            "--method=scape", "--density=%g" % density, "--dense_warmup=%d" % warmup,
            "--seed=3", "--validate=true", "--eval_interval=8"]


def run_in_process(name, flags):
    report = os.path.join(WORK, name + "-inproc.json")
    proc = subprocess.run([TRAIN] + flags + ["--quiet", "--report_out=" + report],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=TIMEOUT_S)
    if proc.returncode != 0:
        raise AssertionError("in-process run failed:\n" + proc.stdout)
    with open(report) as f:
        return json.load(f)["ranks"]


def run_processes(name, world, flags, env=None):
    rendezvous = os.path.join(WORK, name + "-rendezvous")
    os.makedirs(rendezvous)
    full_env = dict(os.environ)
    full_env.update(env or {})
    procs, logs, reports = [], [], []
    for r in range(world):
        reports.append(os.path.join(WORK, "%s-rank%d.json" % (name, r)))
        logs.append(open(os.path.join(WORK, "%s-rank%d.log" % (name, r)), "w+"))
        procs.append(subprocess.Popen(
            [RANK] + flags + ["--rank=%d" % r, "--rendezvous_dir=" + rendezvous,
                              "--timeout_ms=30000", "--report_out=" + reports[r]],
            stdout=logs[r], stderr=subprocess.STDOUT, env=full_env))
    failures = []
    for r, p in enumerate(procs):
        try:
            code = p.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            code = "timeout"
        if code != 0:
            logs[r].seek(0)
            failures.append("rank %d exited %s:\n%s" % (r, code, logs[r].read()[-3000:]))
    for log in logs:
        log.close()
    if failures:
        raise AssertionError("\n".join(failures))
    out = []
    for path in reports:
        with open(path) as f:
            out.append(json.load(f))
    return out


class ScapeDataPlaneTest(unittest.TestCase):
    def check_equal_runs(self, name, world, density, warmup, steps, sparse_volume_bar, env=None):
        flags = training_flags(world, density, warmup, steps)
        in_process = run_in_process(name, flags)
        processes = run_processes(name, world, flags, env)
        ranks = [p["rank"] for p in processes]
        self.assertEqual(len(in_process), world)
        self.assertEqual([r["rank"] for r in ranks], list(range(world)))

        # Shared state: bitwise the same on every process and in-process.
        for key in ("parameters_crc32c", "first_moment_crc32c", "last_sync_crc32c"):
            want = in_process[0][key]
            for r in range(world):
                self.assertEqual(in_process[r][key], want, "in-process rank %d %s" % (r, key))
                self.assertEqual(ranks[r][key], want,
                                 "%s: process rank %d's %s differs from the in-process run"
                                 % (name, r, key))
        # Local state: rank r's residual equals in-process rank r's, and the
        # ranks' residuals differ (each holds its own unsent increments).
        for r in range(world):
            self.assertTrue(ranks[r]["has_residual"])
            self.assertEqual(ranks[r]["residual_crc32c"], in_process[r]["residual_crc32c"],
                             "%s: rank %d's residual differs from in-process rank %d's"
                             % (name, r, r))
        self.assertEqual(len({r["residual_crc32c"] for r in ranks}), world,
                         "residuals should be local to each rank")

        # Losses: the same bits every step, on every rank.
        for r in range(world):
            self.assertEqual(len(ranks[r]["steps"]), steps)
            for got, want in zip(ranks[r]["steps"], in_process[r]["steps"]):
                self.assertEqual(got["train_loss_bits"], want["train_loss_bits"],
                                 "%s: rank %d step %d loss %r vs in-process %r"
                                 % (name, r, got["step"], got["train_loss"], want["train_loss"]))
                self.assertEqual(got.get("val_loss"), want.get("val_loss"))
                self.assertEqual(got["dense"], want["dense"])
                self.assertEqual(got["synced_values"], want["synced_values"])
            self.assertEqual(ranks[r]["final_val_loss_bits"], in_process[r]["final_val_loss_bits"])
            self.assertGreater(ranks[r]["final_val_loss"], 0)
            self.assertLess(ranks[r]["final_val_loss"], ranks[r]["initial_val_loss"])

        # The run had a dense warm-up and then only sparse steps.
        dense_flags = [s["dense"] for s in ranks[0]["steps"]]
        self.assertEqual(dense_flags, [True] * warmup + [False] * (steps - warmup))

        # Bytes on the wire (the data plane's own counters).
        for r in range(world):
            dense = ranks[r]["dense_bytes_per_step"]
            steps_r = ranks[r]["steps"]
            # Dense steps before the first mask exchange: exactly the ring
            # all-reduce of all N floats, as the in-process group counts it.
            for s in steps_r[:warmup - 1]:
                self.assertEqual(s["bytes_sent"], dense, "%s rank %d step %d" % (name, r, s["step"]))
                self.assertEqual(in_process[r]["steps"][s["step"] - 1]["bytes_sent"], dense)
            sparse = steps_r[warmup:]
            mean_sparse = sum(s["window_bytes_sent"] for s in sparse) / len(sparse)
            self.assertLess(mean_sparse, sparse_volume_bar * dense,
                            "%s rank %d: sparse steps sent %.0f bytes on average, dense %d"
                            % (name, r, mean_sparse, dense))
            # At least the synchronized values themselves left this rank.
            for s in sparse:
                self.assertGreaterEqual(s["bytes_sent"], 4 * s["synced_values"] // world)
        total_sent = sum(p["optimizer_bytes_sent"] for p in processes)
        total_received = sum(p["optimizer_bytes_received"] for p in processes)
        self.assertEqual(total_sent, total_received)

    def test_three_processes_ring_values(self):
        # d = 0.1: ~35k values per step, past 64 KiB, so the values go
        # through the ring; P = 3 also makes the losses' recursive doubling
        # fold rank 2 into rank 0.
        self.check_equal_runs("p3-d10", world=3, density=0.1, warmup=3, steps=18,
                              sparse_volume_bar=0.15)

    def test_four_processes_tcp_recursive_doubling_values(self):
        # d = 0.01: ~3.5k values (14 KB), so the values' all-reduce is
        # recursive doubling; TCP only, as across hosts.
        self.check_equal_runs("p4-d01-tcp", world=4, density=0.01, warmup=2, steps=16,
                              sparse_volume_bar=0.03, env={"UCX_TLS": "tcp"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
