#!/usr/bin/env bash
# ablate_stmatrix_o.sh — the forward's epilogue staging O with stmatrix (kFwdStmatrixO) against
# one 4-byte shared store per packed pair; same bytes, same O bits. It matters where tile
# boundaries are a large share of the time: the cross sets and L = 256. One bench call.
#   usage: experiments/ablate_stmatrix_o.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-stmatrix-o}
SETS=${SETS:-self,cross}
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-stmatrix-o "$FULL,$OFF" "$SETS" "$DIRS"
