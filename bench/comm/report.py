"""Formats bench/comm/run.sh results: one row per (transport, P, op, size)
with our bus bandwidth (the tuned schedule), main's schedule measured beside
it in the same processes, Gloo's at the same (P, op, size), ucx_perftest
tag_bw one way and the bidirectional ceiling (the mean per-pair rate of two
tag_bw pairs running at once), and the ratios; then the reduction kernel
against the plain loop. Ends with one JSON line: for TCP loopback, per P,
the smallest ratio of the tuned schedule over the sizes >= 1 MiB."""
import json
import sys

MIN_SUMMARY_BYTES = 1 << 20


def perftest_gbs(line):
    # ucx_perftest -f: iterations, latency 50%, avg, overall, bandwidth avg,
    # bandwidth overall (MB/s, MB = 2^20), msg rate avg, overall.
    fields = line.split()
    if len(fields) < 6:
        return None
    try:
        return float(fields[5]) * 1048576 / 1e9
    except ValueError:
        return None


def bidir_gbs(lines):
    rates = [perftest_gbs(line) for line in lines]
    if not rates or any(r is None for r in rates):
        return None
    return sum(rates) / len(rates)


def human(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, digits=3):
    return ("%." + str(digits) + "f") % x if x is not None else "n/a"


def read(path):
    perftest, bidir, gloo, main_rows, rows, kernels = {}, {}, {}, {}, [], []
    with open(path) as f:
        for raw in f:
            try:
                item = json.loads(raw)
            except ValueError:
                print("skipped unreadable result: %r" % raw[:120], file=sys.stderr)
                continue
            if "perftest_size" in item:
                perftest[(item["transport"], item["perftest_size"])] = perftest_gbs(item["line"])
            elif "perftest_bidir_size" in item:
                bidir[(item["transport"], item["perftest_bidir_size"])] = bidir_gbs(item["lines"])
            elif "kernel" in item:
                kernels.append(item)
            elif item.get("transport") == "gloo":
                gloo[(item["world"], item["op"], item["bytes"])] = item["busbw_gbs"]
            elif item.get("config") == "main":
                main_rows[(item["transport"], item["world"], item["op"], item["bytes"])] = item
            else:
                rows.append(item)
    return perftest, bidir, gloo, main_rows, rows, kernels


def main(path):
    perftest, bidir, gloo, main_rows, rows, kernels = read(path)
    print("| transport | P | collective | size | busbw GB/s | main's schedule GB/s | × main "
          "| Gloo (TCP) busbw GB/s | × Gloo "
          "| ucx_perftest tag_bw GB/s | × tag_bw | bidirectional ceiling GB/s | × ceiling "
          "| CPU user / sys |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    summary = {"allreduce_vs_gloo": {}, "allgather_vs_gloo": {}, "allreduce_vs_ceiling": {}}

    def keep_min(key, world, value):
        if value is None:
            return
        table = summary[key]
        table[str(world)] = min(table.get(str(world), value), value)

    for r in rows:
        ours = r["busbw_gbs"]
        g = gloo.get((r["world"], r["op"], r["bytes"]))
        one_way = perftest.get((r["transport"], r["bytes"]))
        ceiling = bidir.get((r["transport"], r["bytes"]))
        old = main_rows.get((r["transport"], r["world"], r["op"], r["bytes"]), {}).get("busbw_gbs")
        cpu = "%.2f / %.2f" % (r["cpu_user"], r["cpu_sys"]) if "cpu_user" in r else "n/a"
        print("| %s | %d | %s | %s | %.3f | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["transport"], r["world"], r["op"], human(r["bytes"]), ours, fmt(old),
            fmt(ratio(ours, old), 2), fmt(g),
            fmt(ratio(ours, g), 2), fmt(one_way), fmt(ratio(ours, one_way), 2), fmt(ceiling),
            fmt(ratio(ours, ceiling), 2), cpu))
        if r["transport"] != "tcp" or r["bytes"] < MIN_SUMMARY_BYTES:
            continue
        if r["op"] == "all_reduce":
            keep_min("allreduce_vs_gloo", r["world"], ratio(ours, g))
            keep_min("allreduce_vs_ceiling", r["world"], ratio(ours, ceiling))
        elif r["op"] == "all_gather":
            keep_min("allgather_vs_gloo", r["world"], ratio(ours, g))
    if kernels:
        print()
        print("| reduction kernel | size | plain loop GB/s | vectorised GB/s | × plain |")
        print("|---|---|---|---|---|")
        for k in kernels:
            print("| %s | %s | %.2f | %.2f | %.2f |" % (k["kernel"], human(k["bytes"]),
                                                       k["plain_gbs"], k["vector_gbs"],
                                                       k["vector_vs_plain"]))
    rounded = {k: {w: round(v, 3) for w, v in sorted(t.items())} for k, t in summary.items()}
    print(json.dumps(rounded))


if __name__ == "__main__":
    main(sys.argv[1])
