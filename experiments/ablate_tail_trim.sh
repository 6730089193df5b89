#!/usr/bin/env bash
# ablate_tail_trim.sh — the opt-in jagged-tail trimming of the forward (fwd_config.h), against the
# default kernel, in one bench call: kFwdSkipDeadRows (a consumer warpgroup whose 64 query rows all
# lie past its sequence's end issues no GEMM), kFwdNarrowTail (a last key block holding at most 64
# keys runs its S and PV GEMMs and its activation at half width) and both (sm90-tail-trim). Only
# lengths that are not tile multiples can gain: the s = 0.5 sets; the s = 1.0 and cross sets (whole
# tiles) measure what the extra code costs where there is nothing to trim.
#   usage: experiments/ablate_tail_trim.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
VARIANTS=${VARIANTS:-sm90-tail-trim,sm90-skip-dead-rows,sm90-narrow-tail}
SETS=${SETS:-self-s0.5,self-s1.0,cross}
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$VARIANTS"
bench ablation-tail-trim "$FULL,$VARIANTS" "$SETS" "$DIRS"
