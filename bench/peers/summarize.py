#!/usr/bin/env python3
"""Summarizes side_by_side outputs (bench/peers/README.md): one row per case and thread count with
posenc's and the peer's medians and the ratio posenc / peer, the median over the runs given (and the
range over them), plus the ratio of the minima.

usage: bench/peers/summarize.py run1.txt [run2.txt ...] [--peer ggml] [--versus posenc.fused]
"""
import argparse
import statistics
from collections import defaultdict


def parse(path):
    rows = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 5 or line.startswith("#") or parts[0] == "case" or parts[2] == "ratios:":
                continue
            try:
                rows[(parts[0], int(parts[1]), parts[2])] = (float(parts[3]), float(parts[4]))
            except ValueError:
                continue
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--peer", default="ggml")
    ap.add_argument("--versus", default="posenc.fused")
    a = ap.parse_args()
    runs = [parse(p) for p in a.runs]
    keys = []
    for r in runs:
        for (case, thr, row) in r:
            if row == a.peer and (case, thr) not in keys:
                keys.append((case, thr))
    print(f"| case | threads | {a.versus} ms | {a.peer} ms | ratio (runs) | ratio of minima |")
    print("|---|---:|---:|---:|---|---:|")
    for case, thr in keys:
        ratios, mine, peer, rmin = [], [], [], []
        for r in runs:
            p, g = r.get((case, thr, a.versus)), r.get((case, thr, a.peer))
            if p and g:
                ratios.append(p[0] / g[0])
                mine.append(p[0])
                peer.append(g[0])
                rmin.append(p[1] / g[1])
        if not ratios:
            continue
        rng = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
        print(f"| {case} | {thr} | {statistics.median(mine):.3f} | {statistics.median(peer):.3f} | "
              f"{statistics.median(ratios):.2f}{rng} | {statistics.median(rmin):.2f} |")


if __name__ == "__main__":
    main()
