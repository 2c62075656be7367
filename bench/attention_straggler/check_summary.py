"""Checks the straggler benchmark's JSON summaries (smoke_test.sh)."""
import json
import math
import sys


def check(path):
    with open(path) as f:
        summary = json.load(f)
    workers, servers = summary["workers"], summary["servers"]
    for mode in ("colocated", "disaggregated"):
        m = summary[mode]
        assert len(m["worker_ms"]) == workers, (path, mode, m["worker_ms"])
        assert all(t > 0 for t in m["worker_ms"]), (path, mode, m["worker_ms"])
        assert len(m["step_ms_per_repeat"]) == summary["repeats"], (path, mode)
        assert 0 < m["step_best_ms"] <= m["step_ms"], (path, mode)
        assert m["spread_max_min"] >= 1 and m["spread_max_mean"] >= 1, (path, mode)
    c, d = summary["colocated"], summary["disaggregated"]
    assert c["server_compute_ms"] == [], path
    assert len(d["server_compute_ms"]) == servers, (path, d["server_compute_ms"])
    assert all(t > 0 for t in d["server_compute_ms"]), (path, d["server_compute_ms"])
    assert c["load_max_mean"] > 1.5, (path, c["load_max_mean"])  # the skew is there
    assert 1 <= d["load_max_mean"] < c["load_max_mean"], (path, d["load_max_mean"])
    assert len(d["plan_server_pairs"]) == servers, path
    assert d["bytes_per_worker_step"] > 0, path
    assert summary["step_ratio"] > 0 and summary["best_step_ratio"] > 0, path
    error = summary["max_relative_error"]
    assert math.isfinite(error) and error <= 1e-5, (path, error, summary["worst_output"])
    print(f"{path}: ok (step ratio {summary['step_ratio']:.2f}, max relative error {error:.2g})")


for path in sys.argv[1:]:
    check(path)
