#!/usr/bin/env bash
# ablate_skip_empty_half.sh — a consumer warpgroup with nothing to compute skipping its GEMMs, on
# and off: in the forward the second warpgroup on a last tile of at most 64 query rows (all its rows
# past the sequence's end, kFwdSkipEmptyHalf), in the backward the second warpgroup on a KV tile of
# at most 64 keys (all its keys past the end, kBwdSkipEmptyHalf; it still runs its dQ jobs). Only
# jagged lengths have such tiles: the s = 0.5 sets. On the s = 1 sets (whole tiles) the host leaves
# both off (compiled in but never taken the forward's cost 3-4 % at L = 512), so both names run one
# kernel there: the control. One bench call.
#   usage: experiments/ablate_skip_empty_half.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-skip-empty-half}
SETS=${SETS:-self-s0.5,self-s1.0}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
DIRS=${DIRS:-both}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-skip-empty-half "$FULL,$OFF" "$SETS" "$DIRS"
