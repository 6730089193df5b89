#!/usr/bin/env python3
"""parity_summary.py — issue 5's parity from the JSON of experiments/parity.sh.

usage: parity_summary.py DIR PREFIX [KERNEL]   (KERNEL: the forward timed, default sm90)

For every L and round: the s = 1 and s = 0.5 forwards' TFLOP/s, their fractions of the set's physical
limit and the ratio s = 0.5 / s = 1 (the criterion asks for >= 0.90), once with each call's own
limits (its measured GEMM ceiling and copy bandwidth) and once with the spec's limits of
perf/TARGETS.md, which do not move with the machine.
"""
import glob
import json
import os
import re
import statistics
import sys

# perf/TARGETS.md, "limit" column of the forward table (TFLOP/s on the H200 it was measured on).
SPEC_LIMITS = {
    ("self-s1.0", 256): 547, ("self-s1.0", 512): 750, ("self-s1.0", 1024): 750, ("self-s1.0", 2048): 750,
    ("self-s0.5", 256): 365, ("self-s0.5", 512): 730, ("self-s0.5", 1024): 750, ("self-s0.5", 2048): 750,
}
CRITERION = 0.90
NAME = re.compile(r"-r(\d+)-(self-s[01]\.[05])-L(\d+)-")


def forward_row(path, kernel):
    with open(path) as f:
        rows = [r for r in json.load(f)["rows"] if r["kernel"] == kernel and r["direction"] == "fwd"]
    if len(rows) != 1:
        raise SystemExit(f"{path}: expected one {kernel} forward row, found {len(rows)}")
    return rows[0]


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    directory, prefix = sys.argv[1], sys.argv[2]
    kernel = sys.argv[3] if len(sys.argv) == 4 else "sm90"
    runs = {}  # (round, L) -> {family: row}
    for path in sorted(glob.glob(os.path.join(directory, prefix + "-r*-self-s*-L*-*.json"))):
        m = NAME.search(os.path.basename(path)[len(prefix):])
        if not m:
            continue
        rnd, fam, length = int(m.group(1)), m.group(2), int(m.group(3))
        runs.setdefault((rnd, length), {})[fam] = forward_row(path, kernel)
    if not runs:
        raise SystemExit(f"no JSON named {prefix}-r*-self-s*-L*-*.json in {directory}")

    print(f"{'L':>5} {'round':>5} {'first':>9} | {'s=1 TF/s':>8} {'s=0.5':>7} | "
          f"{'frac s=1':>8} {'s=0.5':>6} {'ratio':>6} | {'spec s=1':>8} {'s=0.5':>6} {'ratio':>6}")
    by_length = {}
    for (rnd, length), fams in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if set(fams) != {"self-s1.0", "self-s0.5"}:
            print(f"{length:>5} {rnd:>5}  incomplete: {sorted(fams)}")
            continue
        a, b = fams["self-s1.0"], fams["self-s0.5"]
        own = b["fraction_of_limit"] / a["fraction_of_limit"]
        spec_a = a["tflops"] / SPEC_LIMITS[("self-s1.0", length)]
        spec_b = b["tflops"] / SPEC_LIMITS[("self-s0.5", length)]
        spec = spec_b / spec_a
        first = "s=1" if rnd % 2 == 1 else "s=0.5"
        by_length.setdefault(length, []).append((own, spec))
        print(f"{length:>5} {rnd:>5} {first:>9} | {a['tflops']:>8.1f} {b['tflops']:>7.1f} | "
              f"{a['fraction_of_limit']:>8.3f} {b['fraction_of_limit']:>6.3f} {own:>6.3f} | "
              f"{spec_a:>8.3f} {spec_b:>6.3f} {spec:>6.3f}")
    print(f"\nmedian ratio per L (criterion >= {CRITERION:.2f}): each call's limits / the spec's limits")
    for length, ratios in sorted(by_length.items()):
        own = statistics.median(r[0] for r in ratios)
        spec = statistics.median(r[1] for r in ratios)
        verdict = "met" if min(own, spec) >= CRITERION else ("met by one reading" if max(own, spec) >= CRITERION
                                                             else "short")
        print(f"  L = {length:>4}: {own:.3f} / {spec:.3f}  {verdict}")


if __name__ == "__main__":
    main()
