#!/usr/bin/python3
"""AdamS in PyTorch (float64), the reference for adams_test.

Usage: adams_reference.py DIR. Reads DIR/config.json ({"n", "steps", "lr": [...],
"beta1", "beta2", "eps", "weight_decay"}), DIR/params.f32, DIR/grads.f32 (steps x n),
DIR/decay.u8; writes DIR/expected.f64 (the parameters after every step, steps x n).
"""
import json
import os
import sys

import torch


def main():
    d = sys.argv[1]
    cfg = json.load(open(os.path.join(d, "config.json")))
    n, steps = cfg["n"], cfg["steps"]
    read = lambda name, dtype: torch.frombuffer(bytearray(open(os.path.join(d, name), "rb").read()), dtype=dtype)
    theta = read("params.f32", torch.float32).to(torch.float64).clone()
    grads = read("grads.f32", torch.float32).to(torch.float64).reshape(steps, n)
    decay = read("decay.u8", torch.uint8).to(torch.bool)
    b1, b2, eps, wd = cfg["beta1"], cfg["beta2"], cfg["eps"], cfg["weight_decay"]
    m = torch.zeros(n, dtype=torch.float64)
    out = []
    for t in range(steps):
        g, lr = grads[t], cfg["lr"][t]
        v = b2 * m * m + (1 - b2) * g * g          # the PREVIOUS first moment
        m = b1 * m + (1 - b1) * g
        step = m / (v.sqrt() + eps)
        theta = theta - lr * (step + wd * theta * decay)
        out.append(theta.clone())
    torch.stack(out).numpy().tofile(os.path.join(d, "expected.f64"))


if __name__ == "__main__":
    main()
