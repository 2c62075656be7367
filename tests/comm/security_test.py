"""Intruders: a process without the right token, and one of a stale
generation, claiming a real rank. Both are turned away with a clear error
(and logged by the ranks), and the real ranks finish undisturbed."""
import unittest

from comm_test_harness import Group


def run_with_intruder(test, intruder_args, expect_in_error, refused_by_peer=True,
                      expect_in_logs=None):
    group = Group()
    try:
        world = 3
        # The intruder claims rank 0, which dials every other rank. It starts
        # first; the real ranks stay up a moment after their collectives so
        # its attempts are answered, not refused.
        intruder = group.start(0, world, ["--scenario=connect_only", "--publish=false",
                                          "--timeout_ms=8000"] + intruder_args)
        ranks = group.start_all(world, ["--scenario=collectives", "--sizes=1,1001,40000",
                                        "--generation=5", "--linger_ms=1500"])
        for r in ranks:
            test.assertEqual(r.wait(60), 0, r.describe())
        code = intruder.wait(30)
        test.assertEqual(code, 2, intruder.describe())
        t, item = intruder.first("error")
        test.assertIsNotNone(item, intruder.describe())
        if refused_by_peer:
            test.assertIn("rejected our connection", item["error"])
        test.assertIn(expect_in_error, item["error"])
        test.assertEqual(item["code"], "PERMISSION_DENIED")
        # The rejecting ranks logged who they turned away and why.
        logs = "".join(r.stderr_tail(200) for r in ranks[1:])
        test.assertIn("rejected connection from", logs)
        test.assertIn(expect_in_logs or expect_in_error, logs)
    finally:
        group.close()


class SecurityTest(unittest.TestCase):
    def test_wrong_token_is_rejected(self):
        # The intruder learns nothing: the real rank's proof does not verify
        # with its secret, so it is the one to hang up, and the real ranks
        # log that it never proved the secret (whether its refusal or its
        # hanging up reached them first).
        run_with_intruder(self, ["--token=not-the-secret", "--generation=5"],
                          "wrong secret", refused_by_peer=False,
                          expect_in_logs="it never proved the job's secret")

    def test_stale_generation_is_rejected(self):
        run_with_intruder(self, ["--generation=4"], "stale generation 4")


if __name__ == "__main__":
    unittest.main(verbosity=2)
