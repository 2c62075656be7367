"""A rank killed (kill -9) or stalled (SIGSTOP) during large all-reduces:
every surviving rank's pending operation must fail within the timeout plus
a margin, with an error that names the lost peer."""
import signal
import time
import unittest

from comm_test_harness import Group

TIMEOUT_S = 3.0
MARGIN_S = 2.0   # process scheduling on a loaded 2-core CI box
COUNT = 4 * 1024 * 1024  # 16 MiB per all-reduce


def run_failure(test, world, victim, sig, env=None):
    group = Group()
    try:
        ranks = group.start_all(world, ["--scenario=allreduce_loop", "--sizes=%d" % COUNT,
                                        "--timeout_ms=%d" % int(TIMEOUT_S * 1000)], env)
        for r in ranks:
            test.assertIsNotNone(r.wait_for("ready", 20), r.describe())
        time.sleep(0.2)  # well inside an all-reduce loop
        failed_at = time.time()
        ranks[victim].signal(sig)
        survivors = [r for r in ranks if r.rank != victim]
        for r in survivors:
            code = r.wait(TIMEOUT_S + MARGIN_S + 10)
            test.assertEqual(code, 3, r.describe())
            t, item = r.first("error")
            test.assertIsNotNone(item, r.describe())
            elapsed = item["error_unix_ms"] / 1000.0 - failed_at
            test.assertLess(elapsed, TIMEOUT_S + MARGIN_S,
                            "rank %d took %.2fs to fail: %s" % (r.rank, elapsed, item["error"]))
            test.assertIn("rank %d" % victim, item["error"], r.describe())
            print("rank %d failed after %.3fs: %s" % (r.rank, elapsed, item["error"]))
    finally:
        group.close()


class FailureTest(unittest.TestCase):
    def test_kill_9_shared_memory(self):
        run_failure(self, 3, 1, signal.SIGKILL)

    def test_kill_9_tcp(self):
        run_failure(self, 4, 2, signal.SIGKILL, env={"UCX_TLS": "tcp"})

    def test_stalled_peer_times_out(self):
        run_failure(self, 3, 2, signal.SIGSTOP)


if __name__ == "__main__":
    unittest.main(verbosity=2)
