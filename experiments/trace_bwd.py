#!/usr/bin/env python3
"""trace_bwd.py — where the backward's time goes, step by step and at tile boundaries, from the
event trace of the profiling variant `sm90-bwd-trace` (kernels/sm90/trace.cuh).

    GDPA_BWD_TRACE=t.npy build/gdpa run --kernel sm90-bwd-trace --len 256 --sparsity 1 --reps 3
    experiments/trace_bwd.py t.npy [--json OUT.json]

Each consumer warpgroup of the first CTAs recorded (SM cycles, event, step) at fixed points of a
step; the producer recorded when it issued each tile's K / V and each step's Q / dO. Printed:
the median cycles of each phase of a step, a step's total, and what a work tile costs beyond
its steps (the tail after its last step, the dK / dV epilogue, the wait for the next K / V).
Pure Python: reads the int32 .npy itself.
"""
import os

from trace_lib import header_enum, load_trace, median, summary_head, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "kernels", "sm90", "bwd_config.h")


EV = header_enum(CONFIG, "BwdTraceEvent")
TILE_START, QDO_READY, TURN_A, A_DONE = EV["kTrTileStart"], EV["kTrQdoReady"], EV["kTrTurnA"], EV["kTrADone"]
DS_PUBLISHED, TURN_B, B_DONE, DQ_HANDED = EV["kTrDsPublished"], EV["kTrTurnB"], EV["kTrBDone"], EV["kTrDqHanded"]
LAST_DQ, EPI_END = EV["kTrLastDqHanded"], EV["kTrEpilogueEnd"]
DQ_BUFFER_FREE, PARTIAL_IN, ACT_COMPUTED = EV["kTrDqBufferFree"], EV["kTrPartialIn"], EV["kTrActComputed"]
DQ_JOB_DONE, DV_OUT = EV["kTrDqJobDone"], EV["kTrDvOut"]
LOAD_KV, LOAD_QDO = EV["kTrLoadKv"], EV["kTrLoadQdo"]
TILE_READ, K_IN, V_IN = EV["kTrTileRead"], EV["kTrKIn"], EV["kTrVIn"]
LOOP_TOP, RECORD_IN = EV["kTrLoopTop"], EV["kTrRecordIn"]
# The gap between a tile's epilogue and the next tile's start, in parts, then the first part in
# its own parts (traces recorded before these events existed have none of them; a part no tile
# has is left out).
NEXT_PARTS = (("to the tile read", None, TILE_READ), ("K in", TILE_READ, K_IN), ("V in", K_IN, V_IN),
              ("barrier", V_IN, TILE_START), ("of the first part: to the loop top", None, LOOP_TOP),
              ("record read", LOOP_TOP, RECORD_IN), ("to the tile read after it", RECORD_IN, TILE_READ))

# The phases of one step: (name, from-event, to-event, what the interval is). A from-event may be a
# tuple of alternatives, the first one recorded counts. With kBwdDqFirst the dQ job completes before
# dV and dK and is handed over while they run (DQ_JOB_DONE, then DQ_HANDED, then B_DONE); without
# it the hand-over follows B_DONE. A step ends at the later of DQ_HANDED and B_DONE.
PHASES = (
    ("wait Q/dO", None, QDO_READY, "from the previous step's end (or the tile start) until Q and dO are in"),
    ("wait turn A", QDO_READY, TURN_A, "for the other warpgroup to pass the turn"),
    ("S^T + dP^T", TURN_A, A_DONE, "issue to completion, incl. queueing behind the other's GEMMs"),
    ("activation", A_DONE, DS_PUBLISHED, "P^T, dS^T, mask; dS^T half stored (incl. the wait for its buffer)"),
    ("wait dS + turn B", DS_PUBLISHED, TURN_B, "the dQ job's dS^T halves, then the turn"),
    ("dV + dK + dQ", TURN_B, B_DONE, "issue to completion (dQ first: the hand-over runs inside)"),
    ("hand dQ over", (DQ_JOB_DONE, B_DONE), DQ_HANDED, "staging buffer free, partial sum / partner's part, staging"),
    ("dV + dK after it", DQ_HANDED, B_DONE, "dQ first only: the wait for dV and dK after the hand-over"),
)
# The activation and the hand-over in parts (jobs that have each event; a pair's rank 0 has no
# PARTIAL_IN).
SUBPHASES = (
    ("  P^T, dS^T math", A_DONE, ACT_COMPUTED, "the activation, its derivative and the mask"),
    ("  dS^T buffer+store", ACT_COMPUTED, DS_PUBLISHED, "wait for a free dS^T buffer, store our half"),
    ("  buffer free", (DQ_JOB_DONE, B_DONE), DQ_BUFFER_FREE, "dS buffer given back, then the writer's read of our previous job"),
    ("  earlier part in", DQ_BUFFER_FREE, PARTIAL_IN,
     "finished jobs: the header, the partial sum (pair: the partner's copy)"),
    ("  add + stage", PARTIAL_IN, DQ_HANDED, "finished jobs: add, barrier, staging"),
)


def analyse_consumer(recs):
    """Per-step phase durations and per-tile boundary costs of one consumer warpgroup."""
    at = {}  # (event, step) -> cycles (the first record of that pair)
    tile_starts = []
    for cyc, ev, step, _ in recs:
        at.setdefault((ev, step), cyc)
        if ev == TILE_START:
            tile_starts.append((step, cyc))
    phases = {name: [] for name, *_ in PHASES + SUBPHASES}
    step_totals, tiles = [], []

    def first_of(events, s):
        for e in events if isinstance(events, tuple) else (events,):
            if (e, s) in at:
                return at[(e, s)]
        return None

    def step_end(s):
        return max(at[(DQ_HANDED, s)], at.get((B_DONE, s), 0))

    for t, (s0, t0) in enumerate(tile_starts):
        s_end = tile_starts[t + 1][0] if t + 1 < len(tile_starts) else None
        steps = []
        s = s0
        while (DQ_HANDED, s) in at and (s_end is None or s < s_end):
            steps.append(s)
            s += 1
        if not steps:
            continue
        for s in steps:
            prev = step_end(s - 1) if s > s0 else t0
            for name, a, b, _ in PHASES + SUBPHASES:
                start = prev if a is None else first_of(a, s)
                end = at.get((b, s))
                if start is not None and end is not None and end >= start:
                    phases[name].append(end - start)
            if s > s0:
                step_totals.append(step_end(s) - step_end(s - 1))
        last = steps[-1]
        tile = {"steps": len(steps)}
        if (LAST_DQ, last) in at:
            tile["tail"] = at[(LAST_DQ, last)] - step_end(last)
        if (EPI_END, last) in at:
            epi_start = at.get((LAST_DQ, last), step_end(last))
            tile["epilogue"] = at[(EPI_END, last)] - epi_start
            if (DV_OUT, last) in at:  # the epilogue in its two parts
                tile["epi_dv"] = at[(DV_OUT, last)] - epi_start
                tile["epi_dk"] = at[(EPI_END, last)] - at[(DV_OUT, last)]
            if t + 1 < len(tile_starts):
                tile["next_kv_wait"] = tile_starts[t + 1][1] - at[(EPI_END, last)]
                s_next = tile_starts[t + 1][0]
                for name, a, b in NEXT_PARTS:
                    start = at[(EPI_END, last)] if a is None else at.get((a, s_next))
                    end = at.get((b, s_next))
                    if start is not None and end is not None:
                        tile["next: " + name] = end - start
        if t + 1 < len(tile_starts):
            tile["time"] = tile_starts[t + 1][1] - t0
        # The first step of a tile runs without a deferred dQ job: its own phases are in `phases`.
        tile["first_step_time"] = step_end(s0) - t0
        tiles.append(tile)
    return phases, step_totals, tiles


def main():
    args, recs, ghz = load_trace(__doc__.split("\n\n")[0], "sm90-bwd-trace")

    phases = {name: [] for name, *_ in PHASES + SUBPHASES}
    steps, tiles = [], []
    by_parity = {0: [], 1: []}  # cluster pairs: even CTAs are rank 0, odd ones rank 1
    for (cta, role), rs in sorted(recs.items()):
        if role > 1:
            continue
        p, s, t = analyse_consumer(rs)
        for k, v in p.items():
            phases[k] += v
        steps += s
        tiles += t
        by_parity[cta % 2].append((p, s))
    # Producer: K / V issued -> the consumers' tile start (same SM, same clock).
    kv_lag = []
    for (cta, role), rs in recs.items():
        if role != 2:
            continue
        starts = {st: c for c, ev, st, _ in recs.get((cta, 0), []) if ev == TILE_START}
        for c, ev, st, _ in rs:
            if ev == LOAD_KV and st in starts:
                kv_lag.append(starts[st] - c)

    step_med = median(steps)
    full = [t for t in tiles if "time" in t]
    summary = summary_head(args.trace, ghz, recs, steps, len(full), phases)
    summary.update({
        "tile": {
            "steps_median": median([t["steps"] for t in full]),
            "time_cycles_median": median([t["time"] for t in full]),
            "first_step_cycles_median": median([t["first_step_time"] for t in tiles]),
            "tail_cycles_median": median([t["tail"] for t in tiles if "tail" in t]),
            "epilogue_cycles_median": median([t["epilogue"] for t in tiles if "epilogue" in t]),
            "epilogue_parts_cycles_median": {
                part: median([t[key] for t in tiles if key in t])
                for part, key in (("dV staged and stored", "epi_dv"),
                                  ("dK staged and stored (after dV; see the kernel for which buffer), stores read", "epi_dk"))
            },
            "next_kv_wait_cycles_median": median([t["next_kv_wait"] for t in tiles if "next_kv_wait" in t]),
            "next_kv_wait_parts_cycles_median": {
                name: median([t["next: " + name] for t in tiles if "next: " + name in t]) for name, *_ in NEXT_PARTS
                if any("next: " + name in t for t in tiles)
            },
            "beyond_steps_cycles_median": median([t["time"] - t["steps"] * step_med for t in full]),
        },
        "kv_issue_to_tile_start_cycles_median": median(kv_lag),
        # Even and odd CTAs apart: a pair's rank 0 and rank 1 (other launches: two halves alike).
        "by_cta_parity": {
            str(par): {
                "step_cycles_median": median([x for _, s in runs for x in s]),
                "phases_cycles_median": {k: median([x for p, _ in runs for x in p[k]]) for k in phases},
            }
            for par, runs in by_parity.items() if runs
        },
    })

    us = lambda c: c / ghz / 1e3 if ghz == ghz and ghz > 0 else float("nan")
    print(f"{args.trace}: {len(recs)} recorders, {len(steps)} steps, {len(full)} whole tiles, SM clock {ghz:.3f} GHz")
    print(f"step (end to end), median: {step_med:.0f} cycles = {us(step_med):.2f} us")
    print("phases of a step (median cycles; they add up to a step only roughly, each is its own median):")
    for name, _, _, what in PHASES + SUBPHASES:
        v = summary["phases_cycles_median"][name]
        print(f"  {name:20s} {v:8.0f}   {what}")
    for par, d in summary["by_cta_parity"].items():
        ph = d["phases_cycles_median"]
        print(f"  CTAs {'even' if par == '0' else 'odd '}: step {d['step_cycles_median']:.0f}; activation "
              f"{ph['activation']:.0f} = math {ph['  P^T, dS^T math']:.0f} + dS^T buffer/store "
              f"{ph['  dS^T buffer+store']:.0f}; hand-over {ph['hand dQ over']:.0f} = buffer free "
              f"{ph['  buffer free']:.0f} + earlier part {ph['  earlier part in']:.0f} + add/stage "
              f"{ph['  add + stage']:.0f}")
    t = summary["tile"]
    beyond = t["beyond_steps_cycles_median"]
    print(f"work tile: {t['steps_median']:.0f} steps, {t['time_cycles_median']:.0f} cycles "
          f"({us(t['time_cycles_median']):.2f} us); beyond its steps {beyond:.0f} cycles "
          f"= {beyond / step_med:.2f} steps")
    print(f"  first step {t['first_step_cycles_median']:.0f}, tail (deferred last dQ job) "
          f"{t['tail_cycles_median']:.0f}, dK/dV epilogue {t['epilogue_cycles_median']:.0f}, "
          f"then waiting for the next K/V {t['next_kv_wait_cycles_median']:.0f}")
    parts = ", ".join(f"{k} {v:.0f}" for k, v in t["next_kv_wait_parts_cycles_median"].items())
    print(f"  the wait for the next K/V in parts: {parts}")
    parts = ", ".join(f"{k} {v:.0f}" for k, v in t["epilogue_parts_cycles_median"].items())
    print(f"  epilogue in parts (rank 1 of a pair first waits for the writer): {parts}")
    print(f"producer: K/V issued -> tile start {summary['kv_issue_to_tile_start_cycles_median']:.0f} cycles")
    write_json(args.json, summary)


if __name__ == "__main__":
    main()
