#!/usr/bin/env bash
# ablate_narrow_last_block.sh — the forward's narrow last key block (kFwdNarrowLastBlock): a tile's
# last block holding at most 64 keys runs its QK^T, activation and PV over those keys only, against
# the whole 128-key block (same O bits: the keys left out lie past the end, where K, V and P are
# zeros). Only the jagged s = 0.5 sets have such blocks; on the others the two names run one kernel.
# One bench call, forward only.
#   usage: experiments/ablate_narrow_last_block.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-narrow-last-block}
SETS=${SETS:-self-s0.5}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-narrow-last-block "$FULL,$OFF" "$SETS" "$DIRS"
