#!/usr/bin/env bash
# ablate_activation.sh — cost of the activation in the full kernel: fast_gelu (MUFU tanh),
# fast_gelu_bf16 (packed bf16x2 tanh), gelu_taylor6 (the paper's ALU-only polynomial, accurate only
# for |x| <= 1) and gelu_poly (ours: ALU-only and accurate everywhere), at D = 128 and D = 64
# (at D = 64 the GEMMs are half as long, so the activation is a larger share of each step).
# One bench call per activation and head dim: the activation and D are per-call options.
#   usage: experiments/ablate_activation.sh [OUT]    (OUT default: experiments/results)
set -euo pipefail
KERNELS=${KERNELS:-sm90}
ACTS=${ACTS:-fast_gelu fast_gelu_bf16 gelu_taylor6 gelu_poly}
DIMS=${DIMS:-128 64}
SETS=${SETS:-self-s1.0,cross-Lk256}
DIRS=${DIRS:-both}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$KERNELS"
require_activations "$(tr ' ' ',' <<<"$ACTS")"

total=$(( $(wc -w <<<"$ACTS") * $(wc -w <<<"$DIMS") ))
n=0
for d in $DIMS; do
  for act in $ACTS; do
    n=$((n + 1))
    say "[$n/$total] $act, D = $d"
    bench "ablation-act-$act-d$d" "$KERNELS" "$SETS" "$DIRS" --act "$act" --dim "$d"
  done
done
