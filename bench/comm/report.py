"""Formats bench/comm/run.sh results: one row per (transport, P, op, size)
with our bus bandwidth, ucx_perftest tag_bw at the same size, and the ratio."""
import json
import sys


def perftest_gbs(line):
    # ucx_perftest -f: iterations, latency 50%, avg, overall, bandwidth avg,
    # bandwidth overall (MB/s, MB = 2^20), msg rate avg, overall.
    fields = line.split()
    if len(fields) < 6:
        return None
    return float(fields[5]) * 1048576 / 1e9


def human(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


def main(path):
    perftest = {}
    rows = []
    with open(path) as f:
        for raw in f:
            try:
                item = json.loads(raw)
            except ValueError:
                print("skipped unreadable result: %r" % raw[:120], file=sys.stderr)
                continue
            if "perftest_size" in item:
                perftest[(item["transport"], item["perftest_size"])] = perftest_gbs(item["line"])
            else:
                rows.append(item)
    print("| transport | P | collective | size | busbw GB/s | ucx_perftest tag_bw GB/s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ref = perftest.get((r["transport"], r["bytes"]))
        ratio = "%.2f" % (r["busbw_gbs"] / ref) if ref else "n/a"
        print("| %s | %d | %s | %s | %.3f | %s | %s |" % (
            r["transport"], r["world"], r["op"], human(r["bytes"]), r["busbw_gbs"],
            "%.3f" % ref if ref else "n/a", ratio))


if __name__ == "__main__":
    main(sys.argv[1])
