#!/usr/bin/env python3
"""Runs benchmark binaries in turn, round after round, and prints each case's median over the rounds
and its ratio to the first binary's. For A/B comparisons of two builds on a noisy host: alternating
spreads the host's slow and fast minutes over both. Each binary prints lines `<case words...> <value>`
(bench/rope_resident does); lower values are better.

  python3 bench/alternate_builds.py OLD/bench/rope_resident NEW/bench/rope_resident --rounds 4
  python3 bench/alternate_builds.py OLD/bench/rope_resident NEW/bench/rope_resident --args AVX2   # capped
"""
import argparse
import collections
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--args", default="", help="arguments for every binary, e.g. --args AVX2 (a SIMD cap)")
    args = ap.parse_args()
    values = collections.defaultdict(list)
    order = []
    for _ in range(args.rounds):
        for b in args.binaries:
            out = subprocess.run([b] + args.args.split(), capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                *case, value = line.split()
                key = " ".join(case)
                if key not in order:
                    order.append(key)
                values[(key, b)].append(float(value))
    width = max(len(k) for k in order)
    print("case".ljust(width), *(f"b{i}".rjust(10) for i in range(len(args.binaries))), "  ratios to b0")
    for key in order:
        meds = [statistics.median(values[(key, b)]) for b in args.binaries]
        print(key.ljust(width), *(f"{m:10.3f}" for m in meds), "  ", *(f"{m / meds[0]:.3f}" for m in meds[1:]))
    for i, b in enumerate(args.binaries):
        print(f"b{i} = {b}", file=sys.stderr)


if __name__ == "__main__":
    main()
