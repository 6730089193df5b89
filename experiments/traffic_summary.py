#!/usr/bin/env python3
"""traffic_summary.py — one line per Nsight Compute CSV that experiments/traffic.sh wrote.

usage: traffic_summary.py CSV [CSV ...]

Each CSV holds `gdpa run`'s printout and ncu's metric rows for one launch. Prints the kernel (from
the file name traffic-DIR-KERNEL-STAMP.csv), the launch's time, the SMs' mean clock, DRAM bytes read
and written and the bytes through L2, and each of those over the first file's.
"""
import csv
import io
import os
import re
import sys

METRICS = {
    "gpu__time_duration.sum": "time_ms",
    "sm__cycles_elapsed.avg.per_second": "clock_ghz",
    "dram__bytes_read.sum": "dram_read_gb",
    "dram__bytes_write.sum": "dram_write_gb",
    "lts__t_bytes.sum": "l2_gb",
}
# ncu prints each metric in the unit it chooses; these bring them to ms, GHz and GB.
UNITS = {"ns": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "nsecond": 1e-6,
         "hz": 1e-9, "khz": 1e-6, "mhz": 1e-3, "ghz": 1.0, "cycle/nsecond": 1.0, "cycle/usecond": 1e-3,
         "byte": 1e-9, "kbyte": 1e-6, "mbyte": 1e-3, "gbyte": 1.0, "tbyte": 1e3}


def read(path):
    """The metric values of one launch, converted, by the names in METRICS."""
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]
    values = {}
    for row in csv.DictReader(io.StringIO("".join(lines))):
        name = row.get("Metric Name")
        if name not in METRICS:
            continue
        unit = row.get("Metric Unit", "").strip().lower()
        if unit not in UNITS:
            raise SystemExit(f"{path}: unit '{unit}' of {name} is not known")
        values[METRICS[name]] = float(row["Metric Value"].replace(",", "")) * UNITS[unit]
    missing = [v for v in METRICS.values() if v not in values]
    if missing:
        raise SystemExit(f"{path}: no {', '.join(missing)} (did ncu profile a launch?)")
    return values


def kernel_of(path):
    m = re.match(r"^traffic-(?:fwd|bwd)-(.+)-\d{8}-\d{6}\.csv$", os.path.basename(path))
    return m.group(1) if m else os.path.basename(path)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    rows = [(kernel_of(p), read(p)) for p in sys.argv[1:]]
    base = rows[0][1]
    print(f"{'kernel':34s} {'ms':>8s} {'GHz':>6s} {'DRAM rd GB':>11s} {'DRAM wr GB':>11s} {'L2 GB':>8s}"
          f"   (over {rows[0][0]}: ms, DRAM read, L2)")
    for kernel, v in rows:
        print(f"{kernel:34s} {v['time_ms']:8.3f} {v['clock_ghz']:6.3f} {v['dram_read_gb']:11.2f} "
              f"{v['dram_write_gb']:11.2f} {v['l2_gb']:8.2f}   x{v['time_ms'] / base['time_ms']:.3f} "
              f"x{v['dram_read_gb'] / base['dram_read_gb']:.3f} x{v['l2_gb'] / base['l2_gb']:.3f}")


if __name__ == "__main__":
    main()
