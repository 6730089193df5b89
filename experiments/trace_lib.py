"""trace_lib.py — reading the event traces of the profiling variants (kernels/sm90/trace.cuh):
the event numbers from the kernel's config header, the int32 .npy the launcher writes, and the
records per recorder. Shared by trace_fwd.py and trace_bwd.py. Pure Python."""
import argparse
import ast
import json
import os
import re
import statistics
import struct
import sys


def header_enum(path, enum):
    """The values of `enum <enum>` in the C++ header at `path`, read from the header the kernel is
    built from so that the numbers here cannot drift from the kernel's: {"kTrTileStart": 1, ...}."""
    with open(path) as f:
        text = f.read()
    m = re.search(r"enum " + enum + r"[^{]*\{(.*?)\};", text, re.S)
    if not m:
        sys.exit(f"{path}: no enum {enum}")
    values, nxt = {}, 0
    for line in m.group(1).splitlines():
        line = line.split("//")[0].strip().rstrip(",")
        if not line:
            continue
        name, _, value = line.partition("=")
        nxt = int(value) if value.strip() else nxt
        values[name.strip()] = nxt
        nxt += 1
    return values


def read_npy_int32(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit(f"{path}: not a .npy file")
    major = data[6]
    hlen_size = 2 if major == 1 else 4
    hlen = int.from_bytes(data[8:8 + hlen_size], "little")
    header = ast.literal_eval(data[8 + hlen_size:8 + hlen_size + hlen].decode("latin1"))
    if header["descr"] != "<i4" or header["fortran_order"]:
        sys.exit(f"{path}: expected a C-order int32 array, got {header}")
    shape = header["shape"]
    body = data[8 + hlen_size + hlen:]
    words = struct.unpack(f"<{len(body) // 4}i", body)
    return shape, words


def records(shape, words):
    """{(cta, role): [(cycles, event, step, ns), ...]} in recording order (TraceRecord, params.h)."""
    ctas, roles, slots, _ = shape
    out = {}
    for c in range(ctas):
        for r in range(roles):
            base = ((c * roles + r) * slots) * 4
            recs = []
            for i in range(slots):
                lo, hi, es, ns = words[base + 4 * i:base + 4 * i + 4]
                if lo == 0 and hi == 0 and es == 0:
                    break
                cycles = (hi & 0xFFFFFFFF) << 32 | (lo & 0xFFFFFFFF)
                es &= 0xFFFFFFFF
                recs.append((cycles, es & 0xFF, es >> 8, ns & 0xFFFFFFFF))
            if recs:
                out[(c, r)] = recs
    return out


def load_trace(description, variant):
    """A trace tool's command line (TRACE.npy [--json OUT]) and its trace: (args, records, SM GHz)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("trace", help=f".npy written by the {variant} variant")
    ap.add_argument("--json", help="write the summary here as well")
    args = ap.parse_args()
    recs = records(*read_npy_int32(args.trace))
    if not recs:
        sys.exit("no records: was the trace variant run on a problem with work?")
    return args, recs, sm_ghz(recs)


def write_json(path, summary):
    """The summary to `path` (the --json option), if one was given."""
    if path:
        with open(path, "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")


def sm_ghz(recs):
    """SM clock from the recorders' own (cycles, ns) pairs: the cycle counter over the global timer,
    first to last record of each recorder, the median over recorders."""
    rates = []
    for rs in recs.values():
        if len(rs) > 1 and rs[-1][3] != rs[0][3]:
            rates.append((rs[-1][0] - rs[0][0]) / ((rs[-1][3] - rs[0][3]) & 0xFFFFFFFF))
    return median(rates)


def median(v):
    return statistics.median(v) if v else float("nan")


def summary_head(trace, ghz, recs, steps, tiles_measured, phases):
    """The first fields of a trace tool's JSON summary, the same in both tools."""
    return {
        "trace": os.path.basename(trace),
        "sm_ghz": round(ghz, 3),
        "recorders": len(recs),
        "steps_measured": len(steps),
        "tiles_measured": tiles_measured,
        "step_cycles_median": median(steps),
        "phases_cycles_median": {k: median(v) for k, v in phases.items()},
    }
