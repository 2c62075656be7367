"""64 MiB collectives (16M floats) at P = 2 and 3: ring and chain paths with
many pipeline segments, results and byte counters checked on every rank."""
import unittest

from collectives_test import run_collectives

SIZES = str(16 * 1024 * 1024)


class LargeCollectivesTest(unittest.TestCase):
    def test_two_ranks_64mib(self):
        run_collectives(self, 2, SIZES, timeout=120)

    def test_three_ranks_64mib(self):
        run_collectives(self, 3, SIZES, timeout=120)


if __name__ == "__main__":
    unittest.main(verbosity=2)
