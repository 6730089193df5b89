#!/usr/bin/env bash
# ablate_half_fold.sh — the forward's halved-P GELU form (kFwdHalfFold, fwd_config.h) on and off:
# with it the activation rounds P = 2 f = x + x t (one multiply per score fewer than f = x/2 (1 + t))
# and O is halved once in the epilogue, giving the same O bits (bf16, GELU tanh forms only).
# All twelve seed sets, forward, fast_gelu, one bench call.
#   usage: experiments/ablate_half_fold.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-half-fold}
SETS=${SETS:-self-s1.0,self-s0.5,cross}
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-half-fold "$FULL,$OFF" "$SETS" "$DIRS"
