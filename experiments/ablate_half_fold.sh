#!/usr/bin/env bash
# ablate_half_fold.sh — the halved-P GELU form on and off (kFwdHalfFold, kBwdHalfFold): the
# activation rounds P = 2 f = x + x t (one multiply per score fewer than f = x/2 (1 + t)) and O (dV
# in the backward) is halved once in the epilogue, giving the same bits (bf16, GELU tanh forms
# only). All twelve seed sets, forward and backward, fast_gelu, one bench call.
#   usage: experiments/ablate_half_fold.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-half-fold}
SETS=${SETS:-self-s1.0,self-s0.5,cross}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
DIRS=${DIRS:-both}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-half-fold "$FULL,$OFF" "$SETS" "$DIRS"
