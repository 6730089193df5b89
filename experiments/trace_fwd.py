#!/usr/bin/env python3
"""trace_fwd.py — where the forward's time goes, step by step, at tile boundaries, and in the
two consumer warpgroups' alternation, from the event trace of the profiling variant
`sm90-fwd-trace` (kernels/sm90/trace.cuh, events in fwd_config.h FwdTraceEvent).

    GDPA_FWD_TRACE=t.npy build/gdpa run --kernel sm90-fwd-trace --no-backward --len 2048 --sparsity 1 --reps 2
    experiments/trace_fwd.py t.npy [--json OUT.json]

Each consumer warpgroup of the first CTAs recorded (SM cycles, event, key block) at fixed points.
Printed: the median cycles of each phase of an inner step (turn wait, issue, S, activation, PV),
a step's total, what a tile costs beyond its steps, and how the two warpgroups share the tensor
cores: how long each waited for the turn after the other passed it, and how much of their
activations ran at the same time (both then compete for the MUFU and FMA pipes while the
tensor cores may have nothing queued). A trace of the three-warpgroup form
(`sm90-fwd-flags` with kFwdThreeConsumers | kFwdTrace) has no turns: it is reported per block
(waits and issue, S, activation, PV), with the share of time some GEMM is outstanding. Pure Python.
"""
import os

from trace_lib import header_enum, load_trace, median, summary_head, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
EV = header_enum(os.path.join(HERE, "..", "kernels", "sm90", "fwd_config.h"), "FwdTraceEvent")
TILE_START, TURN, ISSUED, S_READY = EV["kFtTileStart"], EV["kFtTurn"], EV["kFtIssued"], EV["kFtSReady"]
QK_ISSUED, PV_ISSUED, OPERANDS = EV["kFtQkIssued"], EV["kFtPvIssued"], EV["kFtOperandsReady"]
ACT_DONE, PV_DONE, LAST_PV, EPI_END = EV["kFtActDone"], EV["kFtPvDone"], EV["kFtLastPvDone"], EV["kFtEpilogueEnd"]
RECORD_LOAD = EV["kFtRecordLoad"]  # recorded at the next tile's top, before its TILE_START: in this tile's group

# Phases of inner step j >= 1 of a tile: (name, from, to, what). "prev" is the end of block j - 1
# (its PV_DONE, or block 0's ACT_DONE).
STEP_PHASES = (
    ("wait turn", "prev", TURN, "K_j / V_j-1 arrival and the other warpgroup's pass"),
    ("issue", TURN, ISSUED, "QK^T_j and PV_j-1 issued, turn passed"),
    ("  issue QK", TURN, QK_ISSUED, "the 8 wgmmas of QK^T_j (both operands in shared memory)"),
    ("  issue PV", QK_ISSUED, ISSUED, "the 8 wgmmas of PV_j-1 (P from registers), turn passed"),
    ("S ready", ISSUED, S_READY, "QK^T_j done, incl. queueing behind the other's GEMMs"),
    ("activation", S_READY, ACT_DONE, "P_j = act(S_j) (+ mask), K_j released"),
    ("PV done", ACT_DONE, PV_DONE, "the rest of PV_j-1 after the activation"),
)


# kFwdThreeConsumers (no turns, each block in series): a tile's block 0 starts with TURN and its
# QK^T alone; every block j then runs from S_READY: activation, one batch of PV_j and QK^T_j+1.
SERIAL_PHASES = (
    ("first QK", TURN, S_READY, "a tile's block 0: K_0's arrival, QK^T_0 issued and complete"),
    ("activation", S_READY, ACT_DONE, "P_j = act(S_j) (+ mask)"),
    ("V/K wait", ACT_DONE, OPERANDS, "V_j's and K_j+1's arrival (the producer's TMA loads)"),
    ("issue", OPERANDS, PV_ISSUED, "the wgmmas of PV_j and QK^T_j+1, accepted behind the others' GEMMs"),
    ("GEMMs", PV_ISSUED, PV_DONE, "PV_j and QK^T_j+1 complete, incl. the other warpgroups' GEMMs ahead"),
)


def analyse_serial(recs):
    """Per-block phases, block totals (S_j ready to S_j+1 ready) and the tile count of one warpgroup
    of the three-warpgroup form."""
    phases = {name: [] for name, *_ in SERIAL_PHASES}
    steps = []
    tiles = split_tiles(recs)
    for at in tiles:
        blocks = sorted(s for (e, s) in at if e == S_READY)
        for j in blocks:
            for name, a, b, _ in SERIAL_PHASES:
                if (a, j) in at and (b, j) in at and at[(b, j)] >= at[(a, j)]:
                    phases[name].append(at[(b, j)] - at[(a, j)])
            if (S_READY, j + 1) in at:
                steps.append(at[(S_READY, j + 1)] - at[(S_READY, j)])
    return phases, steps, len(tiles)


def gemm_outstanding_fraction(per_wg):
    """Of the span the warpgroups' records cover, the fraction with at least one GEMM issued and not
    yet complete ([QK issued, S ready) or [PV issued, PV done) of any warpgroup): a bound on how
    often the tensor cores can have had work."""
    spans = sorted(iv for rs in per_wg for iv in intervals(rs, QK_ISSUED, S_READY) + intervals(rs, PV_ISSUED, PV_DONE))
    if not spans:
        return float("nan")
    covered = sum(e - s_ for s_, e in merge(spans))
    lo = min(rs[0][0] for rs in per_wg)
    hi = max(rs[-1][0] for rs in per_wg)
    return covered / (hi - lo) if hi > lo else float("nan")


def main_serial(args, recs, ghz):
    phases = {name: [] for name, *_ in SERIAL_PHASES}
    steps, fractions, act_cycles, act_shared, tiles = [], [], 0, 0, 0
    ctas = sorted({c for c, _ in recs})
    for cta in ctas:
        per_wg = [rs for (c, _), rs in sorted(recs.items()) if c == cta]
        for rs in per_wg:
            p, st, nt = analyse_serial(rs)
            for k, v in p.items():
                phases[k] += v
            steps += st
            tiles += nt
            mine = intervals(rs, S_READY, ACT_DONE)
            others = sorted(iv for o in per_wg if o is not rs for iv in intervals(o, S_READY, ACT_DONE))
            act_cycles += sum(e - s_ for s_, e in mine)
            act_shared += overlap(mine, merge(others))
        fractions.append(gemm_outstanding_fraction(per_wg))
    summary = summary_head(args.trace, ghz, recs, steps, tiles, phases)
    summary.update({
        "form": "three consumer warpgroups, blocks in series",
        "gemm_outstanding_fraction_median": median(fractions),
        "activation_overlap_fraction": act_shared / act_cycles if act_cycles else float("nan"),
    })
    print(f"{args.trace}: {len(recs)} recorders (three-warpgroup form), {len(steps)} blocks, SM clock {ghz:.3f} GHz")
    print(f"block (S ready to S ready), median: {summary['step_cycles_median']:.0f} cycles")
    print("phases of a block (median cycles; each is its own median):")
    for name, _, _, what in SERIAL_PHASES:
        print(f"  {name:18s} {summary['phases_cycles_median'][name]:8.0f}   {what}")
    print(f"some GEMM outstanding during {100 * summary['gemm_outstanding_fraction_median']:.0f} % of the traced span "
          f"(median over CTAs)")
    print(f"activations running at the same time as another warpgroup's: "
          f"{100 * summary['activation_overlap_fraction']:.0f} % of activation cycles")
    write_json(args.json, summary)


def merge(ivs):
    """Sorted intervals merged into non-overlapping ones."""
    out = []
    for s_, e in ivs:
        if out and s_ <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s_, e))
    return out


def split_tiles(recs):
    """The records of one warpgroup cut at each TILE_START: [{(event, step): cycles}, ...]."""
    tiles, cur = [], None
    for cyc, ev, step, _ in recs:
        if ev == TILE_START:
            cur = {}
            tiles.append(cur)
        if cur is not None:
            cur.setdefault((ev, step), cyc)
    return tiles


def analyse_warpgroup(recs):
    tiles = split_tiles(recs)
    phases = {name: [] for name, *_ in STEP_PHASES}
    steps, bounds = [], []
    for t, at in enumerate(tiles):
        n = max((s for (e, s) in at if e == LAST_PV), default=None)
        if n is None:
            continue  # an empty tile (zeros) or one this warpgroup skipped (rows past the end)
        for j in range(1, n):
            prev = at.get((PV_DONE, j - 1), at.get((ACT_DONE, 0)))
            for name, a, b, _ in STEP_PHASES:
                start = prev if a == "prev" else at.get((a, j))
                end = at.get((b, j))
                if start is not None and end is not None and end >= start:
                    phases[name].append(end - start)
            if (TURN, j) in at and (TURN, j + 1) in at:
                steps.append(at[(TURN, j + 1)] - at[(TURN, j)])
        b = {"blocks": n}
        if (TURN, n) in at and (EPI_END, n) in at:
            b["last_pv"] = at[(LAST_PV, n)] - at[(ISSUED, n)]
            b["epilogue"] = at[(EPI_END, n)] - at[(LAST_PV, n)]
            nxt = tiles[t + 1] if t + 1 < len(tiles) else None
            if nxt is not None and (ACT_DONE, 0) in nxt:
                b["next_s"] = nxt[(S_READY, 0)] - at[(EPI_END, n)]
                if (TILE_START, 0) in nxt:  # the next tile's top (its record read), then its S
                    b["next_start"] = nxt[(TILE_START, 0)] - at[(EPI_END, n)]
                    if (RECORD_LOAD, 0) in at:  # ...in two parts: up to the record load, the load
                        b["to_record_load"] = at[(RECORD_LOAD, 0)] - at[(EPI_END, n)]
                        b["record_load"] = nxt[(TILE_START, 0)] - at[(RECORD_LOAD, 0)]
                b["next_act"] = nxt[(ACT_DONE, 0)] - nxt[(S_READY, 0)]
                if (TURN, 1) in nxt:
                    b["finish_to_next_turn"] = nxt[(TURN, 1)] - at[(TURN, n)]
                elif (TURN, 0) in nxt:
                    b["finish_to_next_turn"] = nxt[(TURN, 0)] - at[(TURN, n)]
            if n > 1 and (TURN, n - 1) in at:
                steps.append(at[(TURN, n)] - at[(TURN, n - 1)])
        bounds.append(b)
    return phases, steps, bounds


def intervals(recs, start_ev, end_ev):
    """[start, end) cycle intervals from each start_ev to the same step's end_ev, in order."""
    out, open_ = [], {}
    for cyc, ev, step, _ in recs:
        if ev == start_ev:
            open_[step] = cyc
        elif ev == end_ev and step in open_:
            out.append((open_.pop(step), cyc))
    return out


def overlap(a, b):
    """Cycles of the intervals in `a` covered by those in `b` (both sorted, each non-overlapping)."""
    total, j = 0, 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            total += max(0, min(e, b[k][1]) - max(s, b[k][0]))
            k += 1
    return total


def turn_lags(recs_a, recs_b):
    """For each turn warpgroup b took: cycles since warpgroup a passed its preceding turn (its
    ISSUED). Small: b was waiting for the turn (the alternation, i.e. a, sets the pace); large: b was
    busy with its own chain (activation, PV wait, epilogue) when a passed it."""
    passes = sorted(c for c, ev, _, _ in recs_a if ev == ISSUED)
    lags, i = [], 0
    for c, ev, _, _ in recs_b:
        if ev != TURN:
            continue
        while i + 1 < len(passes) and passes[i + 1] <= c:
            i += 1
        if passes and passes[i] <= c:
            lags.append(c - passes[i])
    return lags


def main():
    args, recs, ghz = load_trace(__doc__.split("\n\n")[0], "sm90-fwd-trace")
    if any(ev == PV_ISSUED for rs in recs.values() for _, ev, _, _ in rs):
        return main_serial(args, recs, ghz)

    phases = {name: [] for name, *_ in STEP_PHASES}
    steps, bounds, lags = [], [], {0: [], 1: []}
    act_cycles = act_shared = 0
    for (cta, role), rs in sorted(recs.items()):
        p, s, b = analyse_warpgroup(rs)
        for k, v in p.items():
            phases[k] += v
        steps += s
        bounds += b
        other = recs.get((cta, 1 - role))
        if other is not None:
            lags[role] += turn_lags(other, rs)
            mine = intervals(rs, S_READY, ACT_DONE)
            act_cycles += sum(e - s_ for s_, e in mine)
            act_shared += overlap(mine, intervals(other, S_READY, ACT_DONE))

    step_med = median(steps)
    whole = [b for b in bounds if "finish_to_next_turn" in b]
    summary = summary_head(args.trace, ghz, recs, steps, len(bounds), phases)
    summary.update({
        "tile": {
            "blocks_median": median([b["blocks"] for b in bounds]),
            "last_pv_cycles_median": median([b["last_pv"] for b in bounds if "last_pv" in b]),
            "epilogue_cycles_median": median([b["epilogue"] for b in bounds if "epilogue" in b]),
            "epilogue_to_next_s_cycles_median": median([b["next_s"] for b in whole]),
            "epilogue_to_next_tile_start_cycles_median": median([b["next_start"] for b in whole if "next_start" in b]),
            "epilogue_to_record_load_cycles_median":
                median([b["to_record_load"] for b in whole if "to_record_load" in b]),
            "record_load_cycles_median": median([b["record_load"] for b in whole if "record_load" in b]),
            "next_first_activation_cycles_median": median([b["next_act"] for b in whole]),
            "finish_turn_to_next_turn_cycles_median": median([b["finish_to_next_turn"] for b in whole]),
        },
        "turn_lag_cycles_median": {f"warpgroup {r}": median(v) for r, v in lags.items()},
        "turn_lag_cycles_p90": {
            f"warpgroup {r}": sorted(v)[int(0.9 * (len(v) - 1))] if v else float("nan") for r, v in lags.items()
        },
        "activation_overlap_fraction": act_shared / act_cycles if act_cycles else float("nan"),
    })

    us = lambda c: c / ghz / 1e3 if ghz == ghz and ghz > 0 else float("nan")
    print(f"{args.trace}: {len(recs)} recorders, {len(steps)} steps, {len(bounds)} tiles, SM clock {ghz:.3f} GHz")
    print(f"inner step (turn to turn), median: {step_med:.0f} cycles = {us(step_med):.2f} us")
    print("phases of an inner step (median cycles; each is its own median):")
    for name, _, _, what in STEP_PHASES:
        print(f"  {name:12s} {summary['phases_cycles_median'][name]:8.0f}   {what}")
    t = summary["tile"]
    print(f"tile boundary ({t['blocks_median']:.0f} key blocks per tile): last PV {t['last_pv_cycles_median']:.0f}, "
          f"epilogue {t['epilogue_cycles_median']:.0f}, then the next tile's S {t['epilogue_to_next_s_cycles_median']:.0f}"
          f" (of which to its start {t['epilogue_to_next_tile_start_cycles_median']:.0f})"
          f" and first activation {t['next_first_activation_cycles_median']:.0f}; finish turn -> next tile's "
          f"first step turn {t['finish_turn_to_next_turn_cycles_median']:.0f} cycles")
    if t["record_load_cycles_median"] == t["record_load_cycles_median"]:  # traces with kFtRecordLoad
        print(f"  to the next tile's start: {t['epilogue_to_record_load_cycles_median']:.0f} cycles to its record's "
              f"load, {t['record_load_cycles_median']:.0f} for the load (from global memory)")
    for r in (0, 1):
        print(f"warpgroup {r} took its turn {summary['turn_lag_cycles_median'][f'warpgroup {r}']:.0f} cycles "
              f"(median; p90 {summary['turn_lag_cycles_p90'][f'warpgroup {r}']:.0f}) after the other passed it")
    print(f"activations running at the same time as the other warpgroup's: "
          f"{100 * summary['activation_overlap_fraction']:.0f} % of activation cycles")
    write_json(args.json, summary)


if __name__ == "__main__":
    main()
