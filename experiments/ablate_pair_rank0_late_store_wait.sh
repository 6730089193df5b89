#!/usr/bin/env bash
# ablate_pair_rank0_late_store_wait.sh — rank 0 of a cluster pair ends a tile's epilogue without
# waiting for its dK / dV stores' read; the next tile's first dS^T store waits for it
# (kBwdPairRank0LateStoreWait) against the wait at the epilogue's end. Same bits. On by default
# with rank 1's late wait at D = 128 (the L = 256 sets); on the other sets both names run one
# kernel. SETS overrides.
#   usage: experiments/ablate_pair_rank0_late_store_wait.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s1.0-L256,cross-Lk256-L256}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-pair-rank0-late-store-wait"
bench ablation-pair-rank0-late-store-wait "sm90,sm90-no-pair-rank0-late-store-wait" "$SETS" bwd
