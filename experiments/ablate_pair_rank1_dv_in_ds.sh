#!/usr/bin/env bash
# ablate_pair_rank1_dv_in_ds.sh — rank 1 of a cluster pair stages dV in its warpgroup's halves of
# the dS^T buffers and dK alone in the staging buffer (kBwdPairRank1DvInDs, with the late store
# wait) against dV and dK one after the other through the staging buffer. Same bits. On by default
# with kBwdPairLateStoreWait at D = 128 (the L = 256 sets); on the other sets both names run one
# kernel. SETS overrides.
#   usage: experiments/ablate_pair_rank1_dv_in_ds.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s1.0-L256,cross-Lk256-L256}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-pair-rank1-dv-in-ds"
bench ablation-pair-rank1-dv-in-ds "sm90,sm90-no-pair-rank1-dv-in-ds" "$SETS" bwd
