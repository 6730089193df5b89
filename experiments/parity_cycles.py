#!/usr/bin/env python3
"""parity_cycles.py — issue 5's parity split into work per cycle and clock, from ncu counts.

usage: parity_cycles.py S1_CSV S05_CSV [S1_CSV S05_CSV ...]

Each pair is one L: the s = 1 and the s = 0.5 forward of experiments/traffic.sh (one launch each, its
time and mean SM clock from Nsight Compute, its useful FLOPs from `gdpa run`'s "work:" line). Prints,
per L, each forward's useful TFLOP per 10^9 SM cycles and, with the spec's limits of perf/TARGETS.md:
  per cycle  the parity if both forwards ran at the same clock (what the tile-time model of
             `gdpa schedule` bounds),
  clock      the s = 0.5 launch's clock over the s = 1 launch's,
  time       the parity of the two launches' times, the product of the two.
Why: at the power cap a forward that moves more bytes per FLOP runs at a lower clock (PERF_NOTES,
forty-first session and "The L = 512 parity taken apart"); a change can move either factor, and the
bench's parity alone cannot say which.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_summary import CRITERION, SPEC_LIMITS  # noqa: E402
from traffic_summary import read  # noqa: E402

WORK = re.compile(r"^work: forward ([0-9.eE+-]+) FLOP")
PROBLEM = re.compile(r"^problem: .* Lq\[(\d+)\.\.(\d+)\] Lk\[(\d+)\.\.(\d+)\]")


def launch(path):
    """{time_ms, clock_ghz, flops, L, dense_q} of one traffic.sh CSV."""
    values = read(path)
    flops = shape = None
    with open(path) as f:
        for line in f:
            work = WORK.match(line)
            if work and flops is None:
                flops = float(work.group(1))
            shape = shape or PROBLEM.match(line)
    if not flops or not shape:
        raise SystemExit(f"{path}: no 'work:' or 'problem:' line of gdpa run (a binary older than the work line?)")
    q_lo, q_hi, k_lo, k_hi = (int(g) for g in shape.groups())
    if k_lo != k_hi:
        raise SystemExit(f"{path}: the keys are jagged (Lk[{k_lo}..{k_hi}]); the seed's sets have every Lk = L")
    values.update(flops=flops, L=k_hi, dense_q=q_lo == q_hi)
    return values


def split(dense_path, half_path):
    """One L's row: (L, s = 1 launch, s = 0.5 launch, their rates, per cycle, clock)."""
    dense, half = launch(dense_path), launch(half_path)
    if not dense["dense_q"] or half["dense_q"] or dense["L"] != half["L"]:
        raise SystemExit(f"{dense_path} / {half_path}: expected the s = 1 then the s = 0.5 forward of one L")
    length = dense["L"]
    # TFLOP per 10^9 SM cycles: FLOPs over (seconds x cycles per second), scaled.
    rates = [v["flops"] / (v["time_ms"] * 1e-3 * v["clock_ghz"] * 1e9) / 1e3 for v in (dense, half)]
    limits = SPEC_LIMITS[("self-s0.5", length)] / SPEC_LIMITS[("self-s1.0", length)]
    return length, dense, half, rates, rates[1] / rates[0] / limits, half["clock_ghz"] / dense["clock_ghz"]


def main():
    paths = sys.argv[1:]
    if not paths or len(paths) % 2:
        raise SystemExit(__doc__)
    rows = [split(a, b) for a, b in zip(paths[0::2], paths[1::2])]
    print(f"{'L':>5} | {'s=1 ms':>7} {'GHz':>6} {'TF/Gcyc':>8} | {'s=0.5 ms':>8} {'GHz':>6} {'TF/Gcyc':>8} | "
          f"{'per cycle':>9} {'clock':>6} {'time':>6}   (parity by the spec's limits; criterion >= {CRITERION:.2f})")
    for length, dense, half, rates, per_cycle, clock in rows:
        print(f"{length:>5} | {dense['time_ms']:7.3f} {dense['clock_ghz']:6.3f} {rates[0]:8.2f} | "
              f"{half['time_ms']:8.3f} {half['clock_ghz']:6.3f} {rates[1]:8.2f} | "
              f"{per_cycle:9.3f} {clock:6.3f} {per_cycle * clock:6.3f}")


if __name__ == "__main__":
    main()
