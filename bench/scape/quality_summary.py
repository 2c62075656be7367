#!/usr/bin/env python3
"""bench/scape/quality.sh's summary: per method, the final validation loss
over seeds (mean, min, max), the gap of the mean to dense AdamS's, and bytes
per step per worker relative to a dense all-reduce (on sparse steps, and
averaged over the whole run); the curves' mean over seeds as one SVG.
Prints a markdown table to stderr and ONE JSON line to stdout.

Usage: quality_summary.py --regime R --steps N --seeds S --model M --out DIR
                          --svg OUT.svg [--target_from STEP] METHOD [METHOD ...]
--target_from: the last step of the dense warm-up or the density ramp; bytes
over the later steps (those at the target density) are reported apart.
Reads DIR/METHOD.seedK.log (a SUMMARY line) and DIR/METHOD.seedK.csv.
"""
import argparse
import csv
import json
import os
import subprocess
import sys


def summary(path):
    try:
        for line in open(path):
            if line.startswith("SUMMARY "):
                return json.loads(line[len("SUMMARY "):])
    except OSError:
        pass
    return None


def mean_curve(paths):
    """(step, mean validation loss) over the seeds that have that step."""
    sums = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for row in csv.DictReader(f):
                if row.get("val_loss"):
                    s = int(row["step"])
                    total, count = sums.get(s, (0.0, 0))
                    sums[s] = (total + float(row["val_loss"]), count + 1)
    return sorted((s, total / count) for s, (total, count) in sums.items())


def mean_bytes_after(path, first_excluded_steps):
    """Mean bytes per step per worker over the steps after the given count."""
    try:
        with open(path) as f:
            sent = [float(r["bytes_sent_per_worker"]) for r in csv.DictReader(f)
                    if int(r["step"]) > first_excluded_steps]
    except OSError:
        return None
    return sum(sent) / len(sent) if sent else None


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--regime", "--model", "--out", "--svg"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--seeds", type=int, required=True)
    ap.add_argument("--target_from", type=int, default=0)
    ap.add_argument("methods", nargs="+")
    a = ap.parse_args()

    methods = {}
    for name in a.methods:
        seeds = range(1, a.seeds + 1)
        by_seed = {k: summary(os.path.join(a.out, f"{name}.seed{k}.log")) for k in seeds}
        runs = [r for r in by_seed.values() if r is not None]
        finals = [r["final_val_loss"] for r in runs if r["final_val_loss"] is not None]
        entry = {"runs": len(runs), "diverged": sum(1 for r in runs if r["diverged"]),
                 "final_by_seed": {k: r["final_val_loss"] for k, r in by_seed.items() if r}}
        if finals:
            entry.update(val_mean=sum(finals) / len(finals), val_min=min(finals), val_max=max(finals))
        if runs:
            dense = runs[0]["dense_bytes_per_step"]
            sparse = [r["sparse_bytes_per_step"] or r["bytes_per_step"] for r in runs]
            entry["sparse_bytes_ratio"] = sum(sparse) / len(sparse) / dense
            entry["avg_bytes_ratio"] = sum(r["bytes_per_step"] for r in runs) / len(runs) / dense
            target = [mean_bytes_after(os.path.join(a.out, f"{name}.seed{k}.csv"), a.target_from)
                      for k in seeds if by_seed[k]]
            target = [t for t in target if t is not None]
            if target:
                entry["target_bytes_ratio"] = sum(target) / len(target) / dense
        methods[name] = entry
    base = methods.get("adams", {}).get("val_mean")
    base_by_seed = methods.get("adams", {}).get("final_by_seed", {})
    for entry in methods.values():
        entry["gap"] = entry["val_mean"] - base if base is not None and "val_mean" in entry else None
        # Against dense AdamS of the same seed (same data order): the seeds'
        # own spread cancels.
        entry["gaps_by_seed"] = [v - base_by_seed[k] for k, v in entry["final_by_seed"].items()
                                 if v is not None and base_by_seed.get(k) is not None]

    print(f"| method | val mean | min | max | gap to dense AdamS | per-seed gaps "
          f"| bytes, sparse steps (x dense) | at the target density (x dense) "
          f"| bytes, whole run (x dense) |", file=sys.stderr)
    print("|---|---|---|---|---|---|---|---|---|", file=sys.stderr)
    fmt = lambda v, spec: "–" if v is None else format(v, spec)
    for name, e in methods.items():
        print(f"| {name} | {fmt(e.get('val_mean'), '.3f')} | {fmt(e.get('val_min'), '.3f')} "
              f"| {fmt(e.get('val_max'), '.3f')} | {fmt(e.get('gap'), '+.3f')} "
              f"| {', '.join(format(g, '+.3f') for g in e['gaps_by_seed']) or '–'} "
              f"| {fmt(e.get('sparse_bytes_ratio'), '.4f')} | {fmt(e.get('target_bytes_ratio'), '.4f')} "
              f"| {fmt(e.get('avg_bytes_ratio'), '.4f')} |",
              file=sys.stderr)

    curves = []
    for name in a.methods:
        points = mean_curve([os.path.join(a.out, f"{name}.seed{k}.csv") for k in range(1, a.seeds + 1)])
        if points:
            path = os.path.join(a.out, f"{name}.mean.csv")
            with open(path, "w") as f:
                f.write("step,val_loss\n")
                for s, v in points:
                    f.write(f"{s},{v}\n")
            curves.append(f"{name}={path}")
    if curves:
        plot = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot_curves.py")
        subprocess.run([sys.executable, plot, a.svg] + curves, check=True)

    keep = ("val_mean", "val_min", "val_max", "gap", "sparse_bytes_ratio", "target_bytes_ratio",
            "avg_bytes_ratio")
    print(json.dumps({"regime": a.regime, "steps": a.steps, "seeds": a.seeds, "model": a.model,
                      "methods": {n: {k: e.get(k) for k in keep} for n, e in methods.items()}}))


if __name__ == "__main__":
    main()
