#!/usr/bin/env bash
# parity.sh — issue 5's parity criterion: the s = 0.5 forward's fraction of its set's physical limit
# against the s = 1 forward's at the same L. Each set is its own bench call (its own GEMM ceiling
# and copy bandwidth, measured just before it), and the two sets of one L run back to back, in
# alternating order from round to round.
#
# Why not one call with both families (`gdpa bench --sets self-s1.0,self-s0.5`): a call times its
# sets in a fixed order, so every s = 0.5 set there runs after all four s = 1 sets, the first of them
# straight after the power-capped self s = 1 L = 2048 backward; the same s = 0.5 L = 256 forward
# measured 295-300 TFLOP/s there and 331 in its family's own call (README, "Results"). Back-to-back
# pairs in both orders give the two sets of one L the same conditions.
#   usage: experiments/parity.sh [OUT]      (OUT default: experiments/results)
#   ROUNDS (default 2): pairs per L; odd rounds time s = 1 first, even rounds s = 0.5 first.
#   LENS (default "256 512 1024 2048").
#   KERNEL (default sm90): the forward timed, e.g. a schedule variant under test.
# Prints, per L and round, both fractions and their ratio, with each call's limits and with the
# spec's (perf/TARGETS.md); experiments/parity_summary.py does that from the JSON.
set -euo pipefail
ROUNDS=${ROUNDS:-2}
KERNEL=${KERNEL:-sm90}
LENS=${LENS:-256 512 1024 2048}
BENCH_INTERLEAVE=0  # one kernel per call: nothing to interleave
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$KERNEL"

stamp=$(date +%Y%m%d-%H%M%S)
prefix="parity-pairs-$stamp"
[ "$KERNEL" = sm90 ] || prefix="parity-pairs-${KERNEL#sm90-}-$stamp"  # a variant's runs named apart
for r in $(seq 1 "$ROUNDS"); do
  for L in $LENS; do
    if [ $((r % 2)) = 1 ]; then order="self-s1.0 self-s0.5"; else order="self-s0.5 self-s1.0"; fi
    for fam in $order; do
      bench "$prefix-r$r-$fam-L$L" "$KERNEL" "$fam-L$L" fwd
    done
  done
done
python3 "$EXP_ROOT/experiments/parity_summary.py" "$OUT" "$prefix" "$KERNEL"
