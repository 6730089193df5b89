#!/usr/bin/env bash
# ablate_skip_empty_half.sh — the forward's second consumer warpgroup on a last tile of at most 64
# query rows (all its rows past the sequence's end) issuing no GEMMs, on and off (kFwdSkipEmptyHalf).
# Only jagged lengths have such tiles: the s = 0.5 sets, forward; the s = 1 sets (whole tiles) are
# the control, where nothing may change. One bench call.
#   usage: experiments/ablate_skip_empty_half.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-skip-empty-half}
SETS=${SETS:-self-s0.5,self-s1.0}
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-skip-empty-half "$FULL,$OFF" "$SETS" "$DIRS"
