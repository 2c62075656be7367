"""Summarises bench/scape/netns_wallclock.sh: one table row per method.

Reads OUT/<method>/rank<R>.json (corescape-scape-rank --report_out) and
prints, over the steps after the warm-up (the same steps for every method):
mean step time, time blocked in the optimizer's collectives, time in the
loss all-reduce (waiting for the slowest rank's compute), bytes sent per
step per worker (data-plane counters over the whole step), the ratios to
dense AdamS, the time to a target training loss, and the whole run's
wall-clock.

Target losses: dense AdamS's training loss (mean of the trailing 10 steps)
at 30% and at 60% of its run. A method reaches one at the first step where
its own trailing mean is at or below it; the time is rank 0's elapsed time
then, warm-up included.

Usage: netns_summary.py --warmup W [--rate R] OUT_DIR METHOD...
"""
import argparse
import glob
import json
import os
import statistics

NAMES = {"adams": "dense AdamS", "adamw": "dense AdamW", "scape-90": "SCAPE 90%",
         "scape-99": "SCAPE 99%"}
DENSITY = {"adams": "1", "adamw": "1", "scape-90": "0.1", "scape-99": "0.01"}
WINDOW = 10
TARGET_SHARES = (0.3, 0.6)


def load(out, method):
    ranks = []
    for path in sorted(glob.glob(os.path.join(out, method, "rank*.json"))):
        with open(path) as f:
            ranks.append(json.load(f)["rank"])
    if not ranks:
        raise SystemExit("no reports in %s/%s" % (out, method))
    ranks.sort(key=lambda r: r["rank"])
    return ranks


def trailing_mean(losses):
    return [statistics.fmean(losses[max(0, i + 1 - WINDOW):i + 1]) for i in range(len(losses))]


def summarise(ranks, warmup):
    steps = len(ranks[0]["steps"])
    steady = range(warmup, steps)  # 0-based indices of the steps after the warm-up

    def mean_over(key):
        return statistics.fmean(r["steps"][i][key] for r in ranks for i in steady)

    losses = [s["train_loss"] for s in ranks[0]["steps"]]
    return {
        "step_s": mean_over("step_seconds"),
        "comm_s": mean_over("comm_seconds"),
        "control_s": mean_over("control_seconds"),
        "bytes": mean_over("window_bytes_sent"),
        "dense_bytes": ranks[0]["dense_bytes_per_step"],
        "parameters": ranks[0]["parameters"],
        "smoothed": trailing_mean(losses),
        "elapsed": [s["elapsed_seconds"] for s in ranks[0]["steps"]],
        "wall": ranks[0]["steps"][-1]["elapsed_seconds"],
        "final_loss": trailing_mean(losses)[-1],
        "steps": steps,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--rate", default="?")
    parser.add_argument("out")
    parser.add_argument("methods", nargs="+")
    args = parser.parse_args()
    results = {m: summarise(load(args.out, m), args.warmup) for m in args.methods}
    base = results.get("adams") or results[args.methods[0]]
    base_name = "adams" if "adams" in results else args.methods[0]
    targets = []
    for share in TARGET_SHARES:
        index = int(round(share * base["steps"])) - 1
        targets.append((index, base["smoothed"][index]))

    def time_to(r, target):
        reached = next((i for i, v in enumerate(r["smoothed"]) if v <= target), None)
        return (reached, r["elapsed"][reached]) if reached is not None else (None, None)

    print()
    print("parameters %d; dense all-reduce %.2f MB sent per worker per step (ring);"
          " steps %d-%d averaged (after the %d warm-up steps); link %s"
          % (base["parameters"], base["dense_bytes"] / 1e6, args.warmup + 1, base["steps"],
             args.warmup, args.rate))
    for n, (index, target) in enumerate(targets):
        print("target %s: loss %.3f = %s's training loss (trailing %d-step mean) at step %d"
              % ("AB"[n], target, NAMES.get(base_name, base_name), WINDOW, index + 1))
    print()
    print("| method | d | step time (s) | × dense | comm/step (s) | loss all-reduce/step (s)"
          " | other/step (s) | bytes/step/worker | × dense | wall, %d steps (s) | × dense"
          " | time to target A (s) | time to target B (s) | final loss (trailing %d) |"
          % (base["steps"], WINDOW))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for m in args.methods:
        r = results[m]
        other = r["step_s"] - r["comm_s"] - r["control_s"]
        cells = []
        for _, target in targets:
            reached, seconds = time_to(r, target)
            _, base_seconds = time_to(base, target)
            if seconds is None:
                cells.append("not reached")
            else:
                cells.append("%.1f (step %d, %.2f× dense)" % (seconds, reached + 1,
                                                              seconds / base_seconds))
        print("| %s | %s | %.3f | %.2f | %.3f | %.3f | %.3f | %s | %.4f | %.1f | %.2f | %s | %s | %.3f |"
              % (NAMES.get(m, m), DENSITY.get(m, "?"), r["step_s"], r["step_s"] / base["step_s"],
                 r["comm_s"], r["control_s"], other, format(int(round(r["bytes"])), ","),
                 r["bytes"] / base["dense_bytes"], r["wall"], r["wall"] / base["wall"],
                 cells[0], cells[1], r["final_loss"]))
        rows.append((m, r, None, None))
    print()
    for m, r, _, _ in rows:
        if m == base_name:
            continue
        print("%s vs %s: step time %+.1f%% (%.2fx per step), communication time %+.1f%%"
              % (NAMES.get(m, m), NAMES.get(base_name, base_name),
                 100 * (r["step_s"] / base["step_s"] - 1), base["step_s"] / r["step_s"],
                 100 * (r["comm_s"] / base["comm_s"] - 1)))
    print("dense effective send rate per worker while communicating: %.1f MB/s"
          % (base["bytes"] / base["comm_s"] / 1e6))


if __name__ == "__main__":
    main()
