"""Collectives across real processes on loopback, P = 2..5.

Each rank checks its results against a serial reference and its byte
counters against the documented schedules (comm_rank.cc); here we check
that every rank passed and that the random-data all-reduce is bitwise
identical on every rank.
"""
import time
import unittest

from comm_test_harness import Group

SIZES = "0,1,7,1001,40000"  # 40000 floats is past the 64 KiB small-message switch


def run_collectives(test, world, sizes, env=None, timeout=60):
    group = Group()
    try:
        ranks = group.start_all(world, ["--scenario=collectives", "--sizes=" + sizes], env)
        codes = [r.wait(timeout) for r in ranks]
        for r, code in zip(ranks, codes):
            test.assertEqual(code, 0, r.describe())
            done = [i for i in r.items() if "done" in i]
            test.assertEqual(len(done), 1, r.describe())
            test.assertEqual(done[0]["failures"], 0, r.describe())
        hashes = [{i["count"]: i["hash"] for i in r.items() if i.get("op") == "all_reduce_random"}
                  for r in ranks]
        test.assertEqual(len(hashes[0]), len(sizes.split(",")))
        for r in range(1, world):
            test.assertEqual(hashes[r], hashes[0], "rank %d's all-reduce differs from rank 0's" % r)
        # Every byte sent is received by someone.
        sent = sum(next(i for i in r.items() if "done" in i)["sent"] for r in ranks)
        received = sum(next(i for i in r.items() if "done" in i)["received"] for r in ranks)
        test.assertEqual(sent, received)
    finally:
        group.close()


class CollectivesTest(unittest.TestCase):
    def test_two_ranks(self):
        run_collectives(self, 2, SIZES)

    def test_three_ranks(self):
        run_collectives(self, 3, SIZES)

    def test_four_ranks(self):
        run_collectives(self, 4, SIZES)

    def test_five_ranks(self):
        run_collectives(self, 5, SIZES)

    def test_three_ranks_tcp_only(self):
        # UCX_TLS=tcp: the TCP transport across hosts, here on loopback.
        run_collectives(self, 3, "1001,40000", env={"UCX_TLS": "tcp"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
