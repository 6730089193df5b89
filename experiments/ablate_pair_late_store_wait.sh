#!/usr/bin/env bash
# ablate_pair_late_store_wait.sh — rank 1 of a cluster pair waits for its dK / dV stores' read of
# the staging buffer where that buffer is next written (the next tile's first finished dQ block;
# kBwdPairLateStoreWait) against the wait at the epilogue's end. Same bits. On by default for pairs
# with at most kBwdPairLateStoreWaitMaxStepsPerTile query steps per KV tile (the L = 256 sets); on
# the other sets both names run one kernel. SETS overrides.
#   usage: experiments/ablate_pair_late_store_wait.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s1.0-L256,cross-Lk256-L256}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-pair-late-store-wait"
bench ablation-pair-late-store-wait "sm90,sm90-no-pair-late-store-wait" "$SETS" bwd
