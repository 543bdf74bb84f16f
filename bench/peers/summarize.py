#!/usr/bin/env python3
"""Summarizes side_by_side outputs (bench/peers/README.md): one row per case and thread count with
posenc's and the peer's medians and the ratio posenc / peer, the median over the runs given (and the
range over them), plus the ratio of the minima.

usage: bench/peers/summarize.py run1.txt [run2.txt ...] [--peer ggml] [--versus posenc.fused]
--versus may list rows (a,b): each case uses the first of them it has, e.g. for vllm
  --peer vllm --versus posenc.inplace_f16in,posenc.fused_inplace
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
    versus = a.versus.split(",")
    multi = len(versus) > 1
    print(f"| case | threads | {'posenc row | ' if multi else ''}{'posenc' if multi else a.versus} ms | {a.peer} ms "
          "| ratio (runs) | ratio of minima |")
    print(f"|---|---:|{'---|' if multi else ''}---:|---:|---|---:|")
    for case, thr in keys:
        ratios, mine, peer, rmin = [], [], [], []
        mine_row = next((v for v in versus if any((case, thr, v) in r for r in runs)), versus[0])
        for r in runs:
            p, g = r.get((case, thr, mine_row)), r.get((case, thr, a.peer))
            if p and g:
                ratios.append(p[0] / g[0])
                mine.append(p[0])
                peer.append(g[0])
                rmin.append(p[1] / g[1])
        if not ratios:
            continue
        rng = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
        print(f"| {case} | {thr} | {mine_row + ' | ' if multi else ''}{statistics.median(mine):.3f} | {statistics.median(peer):.3f} | "
              f"{statistics.median(ratios):.2f}{rng} | {statistics.median(rmin):.2f} |")


if __name__ == "__main__":
    main()
