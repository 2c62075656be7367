#!/usr/bin/env python3
"""Table of corescape-scape-train runs: final validation loss, gap to dense
AdamS, bytes per step per worker and the ratio to a dense all-reduce.

Usage: summarize.py RUN.log [RUN.log ...]   (each log ends with a SUMMARY line)
"""
import json
import sys


def load(path):
    for line in open(path):
        if line.startswith("SUMMARY "):
            return json.loads(line[len("SUMMARY "):])
    return None


def main():
    runs = [(p, load(p)) for p in sys.argv[1:]]
    adams = next((r for _, r in runs if r and r["method"] == "adams"), None)
    base = adams["final_val_loss"] if adams else None
    print("| method | density | final val loss | gap to dense AdamS | bytes/step/worker (sparse steps) "
          "| ratio to dense (sparse steps) | bytes/step/worker (all steps) | ratio (all steps) |")
    print("|---|---|---|---|---|---|---|---|")
    for path, r in runs:
        if r is None:
            print(f"| {path} | – | failed | | | | | |")
            continue
        dense = r["method"] in ("adamw", "adams")
        loss = r["final_val_loss"]
        loss_s = "diverged" if loss is None else f"{loss:.3f}"
        gap = "" if loss is None or base is None else f"{loss - base:+.3f}"
        sparse_b = r["bytes_per_step"] if dense or r["sparse_bytes_per_step"] == 0 else r["sparse_bytes_per_step"]
        sparse_ratio = sparse_b / r["dense_bytes_per_step"]
        print(f"| {r['label'] or r['method']} | {'1' if dense else r['density']} | {loss_s} | {gap} "
              f"| {sparse_b:,.0f} | {sparse_ratio:.4f} | {r['bytes_per_step']:,.0f} | {r['ratio_to_dense']:.4f} |")


if __name__ == "__main__":
    main()
