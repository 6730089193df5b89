#!/usr/bin/env bash
# ablate_intra_overlap.sh — intra-warpgroup overlap (S_{j+1} = Q K_{j+1}^T issued before
# O += P_j V_j, so the activation of step j runs under the PV GEMM) on and off, forward, on all
# twelve seed sets.
#   usage: experiments/ablate_intra_overlap.sh [OUT] (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-intra-overlap}
SETS=${SETS:-self,cross}
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-intra-overlap "$FULL,$OFF" "$SETS" "$DIRS"
