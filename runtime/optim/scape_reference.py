#!/usr/bin/python3
"""The authors' SCAPE formulation, naively in PyTorch (float64): the reference
for scape_reference_test. Written from the equations in docs/scape.md ("The
reference rule"), not from the C++.

Usage: scape_reference.py DIR. Reads DIR/config.json ({"ranks", "n", "steps",
"tensor_bounds", "lr": [...], "density": [...], "dense": [...], "beta1",
"beta2", "eps", "weight_decay", "grad_clip", "dense_small_tensors"}),
DIR/params.f32, DIR/grads.f32 (steps x ranks x n; rank r's gradient scaled so
the ranks' SUM is the global mean gradient), DIR/decay.u8; writes
DIR/expected.f64 (the parameters after every step, steps x n) and
DIR/masks.txt (the mask applied at every step, one line each, empty when dense).
"""
import json
import math
import os
import sys

import torch


def owners(bounds, ranks):
    """Whole tensors dealt to ranks as contiguous runs balanced by element count."""
    total, tensors = bounds[-1], len(bounds) - 1
    cuts, previous = [0], 0
    for r in range(1, ranks):
        target = total * r / ranks
        candidates = range(previous + 1, tensors - (ranks - r) + 1)
        best = min(candidates, key=lambda i: (abs(bounds[i] - target), i))
        cuts.append(best)
        previous = best
    cuts.append(tensors)
    owner = []
    for r in range(ranks):
        owner += [r] * (cuts[r + 1] - cuts[r])
    return owner


def select(c, bounds, owner, density, decay, dense_small):
    chosen = []
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        if dense_small and not decay[lo]:
            chosen += list(range(lo, hi))
            continue
        k = min(hi - lo, max(1, math.floor(density * (hi - lo) + 1e-9)))
        stat = c[owner[i]][lo:hi].abs()
        # Largest first, ties to the lower index.
        order = sorted(range(hi - lo), key=lambda j: (-stat[j].item(), j))[:k]
        chosen += sorted(lo + j for j in order)
    return chosen


def main():
    d = sys.argv[1]
    cfg = json.load(open(os.path.join(d, "config.json")))
    P, n, steps, bounds = cfg["ranks"], cfg["n"], cfg["steps"], cfg["tensor_bounds"]
    read = lambda name, dtype: torch.frombuffer(bytearray(open(os.path.join(d, name), "rb").read()), dtype=dtype)
    theta = read("params.f32", torch.float32).to(torch.float64).clone()
    grads = read("grads.f32", torch.float32).to(torch.float64).reshape(steps, P, n)
    decay = read("decay.u8", torch.uint8).to(torch.bool)
    b1, b2, eps, wd, clip = cfg["beta1"], cfg["beta2"], cfg["eps"], cfg["weight_decay"], cfg["grad_clip"]
    owner = owners(bounds, P)
    m = torch.zeros(n, dtype=torch.float64)
    e = torch.zeros(P, n, dtype=torch.float64)
    next_mask = None
    out, masks = [], []
    for t in range(steps):
        lr = cfg["lr"][t]
        c = b1 * m + (1 - b1) * (P * grads[t]) + e          # P x n: local first moments
        if cfg["dense"][t]:
            mask = list(range(n))
        elif next_mask is None:                               # the first mask: synchronous
            mask = select(c, bounds, owner, cfg["density"][t], decay, cfg["dense_small_tensors"])
        else:
            mask = next_mask
        on = torch.zeros(n, dtype=torch.bool)
        on[mask] = True
        b = c.mean(dim=0)
        e = torch.where(on, torch.zeros_like(c), c)
        g_hat = torch.where(on, (b - b1 * m) / (1 - b1), torch.zeros(n, dtype=torch.float64))
        norm = g_hat.norm().item()
        if clip > 0 and norm > clip:
            g_hat = g_hat * (clip / (norm + 1e-6))
        v = b2 * m * m + (1 - b2) * g_hat * g_hat
        m_new = b1 * m + (1 - b1) * g_hat
        k = t + 1
        step = (m_new / (1 - b1 ** k)) / (v.sqrt() / math.sqrt(1 - b2 ** k) + eps)
        theta = theta - lr * wd * theta * decay - lr * torch.where(on, step, torch.zeros_like(step))
        m = torch.where(on, m_new, torch.zeros_like(m_new))
        masks.append([] if cfg["dense"][t] else mask)
        out.append(theta.clone())
        if t + 1 < steps and not cfg["dense"][t + 1]:
            next_mask = select(c, bounds, owner, cfg["density"][t + 1], decay, cfg["dense_small_tensors"])
        else:
            next_mask = None
    torch.stack(out).numpy().tofile(os.path.join(d, "expected.f64"))
    with open(os.path.join(d, "masks.txt"), "w") as f:
        for mask in masks:
            f.write(" ".join(str(j) for j in mask) + "\n")


if __name__ == "__main__":
    main()
