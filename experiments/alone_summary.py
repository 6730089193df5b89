#!/usr/bin/env python3
"""alone_summary.py — the comparison of experiments/alone_rounds.sh, from its JSON.

usage: alone_summary.py DIR PREFIX KERNEL,KERNEL,...

For every set and direction: each kernel's TFLOP/s in every round, the median over the rounds,
and that median over the first kernel's (above 1: faster than the first kernel).
"""
import glob
import json
import os
import re
import statistics
import sys


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    directory, prefix, kernels = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    name = re.compile(r"^" + re.escape(prefix) + r"-r(\d+)-")
    # (set, direction) -> kernel -> [(round, TFLOP/s)]
    table = {}
    for path in sorted(glob.glob(os.path.join(directory, prefix + "-r*.json"))):
        m = name.match(os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            for row in json.load(f)["rows"]:
                table.setdefault((row["set"], row["direction"]), {}).setdefault(row["kernel"], []).append(
                    (int(m.group(1)), row["tflops"]))
    if not table:
        raise SystemExit(f"no JSON named {prefix}-r*.json in {directory}")
    base = kernels[0]
    for (set_name, direction), by_kernel in sorted(table.items()):
        print(f"{set_name} {direction}")
        ref = statistics.median(t for _, t in by_kernel.get(base, [(0, float('nan'))]))
        for k in kernels:
            runs = sorted(by_kernel.get(k, []))
            if not runs:
                print(f"  {k:34s} no rows")
                continue
            med = statistics.median(t for _, t in runs)
            rounds = " ".join(f"{t:6.1f}" for _, t in runs)
            print(f"  {k:34s} {rounds}  median {med:6.1f}  x{med / ref:.3f} of {base}")


if __name__ == "__main__":
    main()
