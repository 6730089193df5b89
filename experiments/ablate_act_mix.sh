#!/usr/bin/env bash
# ablate_act_mix.sh — the mixed MUFU / FMA evaluation of fast_gelu (kernels/sm90/act_mix.h): the
# full kernel with N sixteenths of each thread's scores sent to the FMA-only gelu_poly and the rest
# to MUFU tanh, for N in $MIXES (0 = the plain MUFU form), at D = 128 and D = 64, forward and
# backward, in one bench call per head dim so every N sees the same inputs and clocks. The best N
# per head dim and direction is what act_mix_default() should hold.
# JSON stems ablation-actmix-d<D>; figure experiments/results/figures/ablation_act_mix.png.
#   usage: experiments/ablate_act_mix.sh [OUT]    (OUT default: experiments/results)
set -euo pipefail
MIXES=${MIXES:-0 2 3 4 6}
DIMS=${DIMS:-128 64}
SETS=${SETS:-self-s1.0,cross-Lk256}
DIRS=${DIRS:-both}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
# The variant names are parsed, not listed: check the prefix the binary knows.
require_kernels sm90-act-mix

kernels=$(for m in $MIXES; do printf 'sm90-act-mix%s,' "$m"; done)
kernels=${kernels%,}
n=0
for d in $DIMS; do
  n=$((n + 1))
  say "[$n/$(wc -w <<<"$DIMS")] D = $d: $kernels"
  bench "ablation-actmix-d$d" "$kernels" "$SETS" "$DIRS" --act fast_gelu --dim "$d"
done
