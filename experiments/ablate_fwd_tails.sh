#!/usr/bin/env bash
# ablate_fwd_tails.sh — the forward's query-column tiles (kernels/sm90/fwd_tail.cu) against the
# default, where a sequence's last query tile of at most 64 rows runs on one consumer warpgroup of
# the main forward (the empty-half skip). Only jagged query lengths have such tiles: the s = 0.5
# sets, with the seed's dense keys. On the s = 1 sets no tile goes to the tail kernel, so the
# variant runs the main forward with only its launch_dependents added: the control. One bench call,
# forward only, interleaved.
# The sibling tails (sm90-fwd-sibling-tails: the tails as query columns inside their sequence's
# whole tiles' CTAs) run the same way under a stem of their own, which the figure merges with this
# one: TAILS=sm90-fwd-sibling-tails STEM=ablation-fwd-tails-sibling experiments/ablate_fwd_tails.sh
#   usage: experiments/ablate_fwd_tails.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
TAILS=${TAILS:-sm90-fwd-tails,sm90-fwd-tails96}
STEM=${STEM:-ablation-fwd-tails}
SETS=${SETS:-self-s0.5,self-s1.0-L512}
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$TAILS"
bench "$STEM" "$FULL,$TAILS" "$SETS" "$DIRS"
