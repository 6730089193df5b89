#!/usr/bin/env bash
# ablate_stmatrix_bwd.sh — the backward's shared-memory staging by stmatrix.x4 against one 4-byte
# shared store per packed pair, two switches measured apart in one bench call: kBwdStmatrix (dV and
# dK at a tile's end, finished dQ blocks on the pair and ordered-finish paths) and kBwdStmatrixDs
# (each step's dS^T half, on the warpgroup's way from its activation to the dQ products). Same
# bytes, same gradient bits. Every seed set: each path (pairs, ordered finish, accumulator) has both.
#   usage: experiments/ablate_stmatrix_bwd.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
KERNELS=${KERNELS:-sm90,sm90-no-stmatrix-grads,sm90-no-stmatrix-ds}
SETS=${SETS:-self,cross}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$KERNELS"
bench ablation-stmatrix-bwd "$KERNELS" "$SETS" bwd
