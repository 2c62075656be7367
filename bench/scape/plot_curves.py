#!/usr/bin/env python3
"""Validation-loss curves of several runs as one SVG (standard library only).

Usage: plot_curves.py OUT.svg LABEL=FILE.csv [LABEL=FILE.csv ...]
Each CSV is corescape-scape-train's --csv output (step, train_loss, val_loss, ...);
rows without val_loss are skipped.
"""
import csv
import sys
from xml.sax.saxutils import escape

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def read_curve(path):
    points = []
    with open(path) as f:
        for row in csv.DictReader(f):
            if row.get("val_loss"):
                points.append((int(row["step"]), float(row["val_loss"])))
    return points


def main():
    out, specs = sys.argv[1], sys.argv[2:]
    curves = []
    for spec in specs:
        label, path = spec.split("=", 1)
        curves.append((label, read_curve(path)))
    xs = [x for _, c in curves for x, _ in c]
    ys = [y for _, c in curves for _, y in c]
    x0, x1 = 0, max(xs)
    # The interesting range: from a bit above the best loss to the loss at the first eval after step 0.
    y0 = min(ys) - 0.05
    late = [y for _, c in curves for x, y in c if x >= x1 * 0.1]
    y1 = max(late) + 0.1 if late else max(ys)
    W, H, L, R, T, B = 760, 460, 70, 230, 30, 50
    sx = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    sy = lambda y: T + (y1 - min(max(y, y0), y1)) / (y1 - y0) * (H - T - B)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>']
    step = 0.1 if y1 - y0 < 1.5 else 0.25
    y = round(y0 / step) * step
    while y <= y1:
        if y >= y0:
            parts.append(f'<line x1="{L}" y1="{sy(y):.1f}" x2="{W - R}" y2="{sy(y):.1f}" stroke="#e5e5e5"/>')
            parts.append(f'<text x="{L - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.2f}</text>')
        y += step
    for i in range(6):
        x = x0 + (x1 - x0) * i / 5
        parts.append(f'<text x="{sx(x):.1f}" y="{H - B + 18}" text-anchor="middle">{int(x)}</text>')
    parts.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#444"/>')
    parts.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">step</text>')
    parts.append(f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 16 {(T + H - B) / 2})">validation loss (nats/byte)</text>')
    for i, (label, c) in enumerate(curves):
        color = COLORS[i % len(COLORS)]
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in c)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        ly = T + 16 + 20 * i
        parts.append(f'<line x1="{W - R + 12}" y1="{ly - 4}" x2="{W - R + 36}" y2="{ly - 4}" stroke="{color}" stroke-width="2"/>')
        final = f" {c[-1][1]:.3f}" if c else ""
        parts.append(f'<text x="{W - R + 42}" y="{ly}">{escape(label)}{final}</text>')
    parts.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
