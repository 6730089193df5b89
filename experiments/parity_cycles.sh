#!/usr/bin/env bash
# parity_cycles.sh — issue 5's parity at each L split into work per cycle and clock: one Nsight
# Compute launch of the s = 1 and of the s = 0.5 forward (the seed's sets: B = 1152, dense keys),
# then experiments/parity_cycles.py. Complements experiments/parity.sh, which times the bench sets
# and cannot tell a change that does more work per cycle from one that lets the clock rise.
#   usage: experiments/parity_cycles.sh OUT      (OUT: where the ncu CSVs go)
#   LENS (default "256 512 1024 2048"), KERNEL (default sm90): the forward measured.
# One launch after two warm-ups, clocks left to the GPU (experiments/traffic.sh): the clock is the
# launch's own, not the sustained clock of a long run under the power cap (that one is lower still
# for the s = 0.5 forward at L = 512: PERF_NOTES, "The L = 512 parity taken apart").
set -euo pipefail
KERNEL=${KERNEL:-sm90}
LENS=${LENS:-256 512 1024 2048}
out=${1:?usage: parity_cycles.sh OUT}
source "$(dirname "$0")/lib.sh"
exp_init "$out"
require_kernels "$KERNEL"
pairs=()
for L in $LENS; do
  for s in 1 0.5; do
    dir="$OUT/cycles-$KERNEL-L$L-s$s"
    mkdir -p "$dir"
    say "ncu: $KERNEL forward, s = $s, L = $L"
    keys=(); [ "$s" = 1 ] || keys=(--len-k "$L")  # s = 0.5: the jagged queries against L dense keys
    KERNELS=$KERNEL experiments/traffic.sh "$dir" --len "$L" --sparsity "$s" "${keys[@]}" >/dev/null
    pairs+=("$(ls -t "$dir"/traffic-fwd-"$KERNEL"-*.csv | head -n 1)")
  done
done
python3 experiments/parity_cycles.py "${pairs[@]}"
