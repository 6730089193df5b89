#!/usr/bin/env bash
# alone_rounds.sh — variants of one kernel compared at their sustained speed: each kernel timed alone
# in a bench call of its own, the calls rotated from round to round so that none is always first.
#   usage: KERNELS=a,b[,c...] SETS=... [DIRS=fwd|bwd|both] [ROUNDS=3] experiments/alone_rounds.sh [OUT]
#
# Why not `--interleave` (what the ablation scripts use): interleaved rounds put the variants under
# one power state, so a variant that draws less power per unit of work lets its partner run at a
# higher clock too, and the difference that would decide their sustained speed disappears. The long
# sets run at the 700 W cap (a forward's first repetitions in a call run 15-18 % faster than the rest
# once the cap engages, PERF_NOTES forty-first session), so a change of L2 or DRAM traffic, or of
# work per cycle at equal time, shows only when each variant runs alone. Calls alone see whatever the
# call before left (a warm GPU), hence the rotation and several rounds.
# Prints, per set and direction, each kernel's median TFLOP/s over the rounds and its ratio to the
# first kernel (experiments/alone_summary.py).
set -euo pipefail
KERNELS=${KERNELS:?name the kernels to compare, e.g. KERNELS=sm90,sm90-no-skip-empty-half}
SETS=${SETS:?name the sets, e.g. SETS=self-s0.5-L1024,self-s0.5-L2048}
DIRS=${DIRS:-both}
ROUNDS=${ROUNDS:-3}
BENCH_INTERLEAVE=0  # one kernel per call
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$KERNELS"

IFS=, read -r -a kernels <<<"$KERNELS"
n=${#kernels[@]}
prefix="alone-$(date +%Y%m%d-%H%M%S)"
for r in $(seq 1 "$ROUNDS"); do
  for i in $(seq 0 $((n - 1))); do
    k=${kernels[$(((i + r - 1) % n))]}
    bench "$prefix-r$r-$k" "$k" "$SETS" "$DIRS"
  done
done
python3 "$EXP_ROOT/experiments/alone_summary.py" "$OUT" "$prefix" "$KERNELS"
