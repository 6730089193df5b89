#!/usr/bin/env python3
"""ncu_stalls.py — where a kernel's warps wait, from an Nsight Compute source page.

Usage:
  ncu --import REPORT.ncu-rep --page source --csv --print-source sass > SRC.csv
  experiments/ncu_stalls.py SRC.csv [--top N]

Prints the share of all warp-state samples per SASS opcode, then the N instructions (default 30)
with the most samples, each with the instruction before it: a warp stalled on a wait is sampled at
the instruction after the one it waits for (a `SYNCS...TRYWAIT` loop is an mbarrier wait, `BAR.SYNC`
a named barrier, `WARPGROUP.DEPBAR` a wgmma wait). Needs a report taken with source counters
(`--set full`, or the SourceCounters section). Standard library only.
"""
import argparse
import collections
import csv
import sys


def find_column(header, *needles):
    for i, name in enumerate(header):
        if all(n.lower() in name.lower() for n in needles):
            return i
    return None


def as_number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv_file")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()

    with open(args.csv_file, newline="") as fh:
        rows = [r for r in csv.reader(fh)]
    # The page may start with a few "==PROF==" or blank lines before the header.
    start = next((i for i, r in enumerate(rows) if find_column(r, "Source") is not None and len(r) >= 3), None)
    if start is None:
        sys.exit("ncu_stalls.py: no header with a 'Source' column; was the page exported with --csv --page source?")
    header, body = rows[start], rows[start + 1:]
    c_src = find_column(header, "Source")
    c_addr = find_column(header, "Address")
    c_all = find_column(header, "Warp Stall Sampling", "All")
    if c_all is None:
        sys.exit("ncu_stalls.py: no 'Warp Stall Sampling (All Samples)' column; profile with source counters")
    # Per-reason sample columns ("stall_long_sb", ...), where the page has them.
    reasons = [(i, name[len("stall_"):]) for i, name in enumerate(header)
               if name.startswith("stall_") and "Not Issued" not in name]
    rows_ok = [r for r in body if len(r) > max(c_src, c_all)]
    lines = [(r[c_addr] if c_addr is not None else str(i), r[c_src].strip(), as_number(r[c_all]))
             for i, r in enumerate(rows_ok)]
    why = [sorted(((as_number(r[i]), n) for i, n in reasons if i < len(r)), reverse=True) for r in rows_ok]
    total = sum(s for _, _, s in lines)
    if total <= 0:
        sys.exit("ncu_stalls.py: no samples in the page")

    by_op = collections.Counter()
    for _, src, s in lines:
        words = src.split()
        if words and words[0].startswith("@"):  # predicate guard, e.g. "@!P0 BRA ..."
            words = words[1:]
        by_op[words[0] if words else src] += s
    print(f"{len(lines)} SASS lines, {int(total)} warp samples")
    print("\nshare of samples by opcode (samples land on the instruction a warp waits at):")
    for op, s in by_op.most_common(15):
        print(f"  {100 * s / total:5.1f} %  {op}")

    if reasons:
        by_reason = collections.Counter()
        for w in why:
            for v, n in w:
                by_reason[n] += v
        print("\nshare of samples by stall reason:")
        for n, v in by_reason.most_common(10):
            print(f"  {100 * v / total:5.1f} %  {n}")

    print(f"\ntop {args.top} instructions (main stall reasons; previous instruction in brackets):")
    ranked = sorted(range(len(lines)), key=lambda i: -lines[i][2])[: args.top]
    for i in ranked:
        addr, src, s = lines[i]
        prev = lines[i - 1][1] if i > 0 else ""
        top = ",".join(f"{n} {100 * v / s:.0f}%" for v, n in why[i][:2] if v > 0) if s > 0 else ""
        print(f"  {100 * s / total:5.1f} %  {addr[-5:]:>5}  {src[:56]:56s} {top:34s} [{prev[:44]}]")


if __name__ == "__main__":
    main()
