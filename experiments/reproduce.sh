#!/usr/bin/env bash
# reproduce.sh — the seed's six figure sets (self-attention forward and backward at s = 1.0 and
# 0.5, cross-attention with short KV forward and backward) for our kernel, the baseline kernel,
# the unfused cuBLAS path and the softmax variant of our kernel. One bench call per set family
# (forward and backward together), so each family's kernels share inputs and ceilings.
#   usage: experiments/reproduce.sh [OUT]            (OUT default: experiments/results)
# The softmax variant is forward-only; the bench skips its backward rows.
set -euo pipefail
KERNELS=${KERNELS:-sm90,baseline,unfused-cublas,sm90-softmax}
FAMILIES=${FAMILIES:-self-s1.0 self-s0.5 cross-Lk256}
DIRS=${DIRS:-both}
# Each kernel timed alone (not interleaved): these are the absolute numbers of the README.
BENCH_INTERLEAVE=${BENCH_INTERLEAVE:-0}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$KERNELS"

n=0
for fam in $FAMILIES; do
  n=$((n + 1))
  say "[$n/$(wc -w <<<"$FAMILIES")] $fam"
  bench "repro-$fam" "$KERNELS" "$fam" "$DIRS"
done
say "figures: make plots (or python3 experiments/plot.py)"
