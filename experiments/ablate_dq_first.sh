#!/usr/bin/env bash
# ablate_dq_first.sh — the order of a consumer warpgroup's second GEMM batch (kBwdDqFirst): on, the
# dQ job is issued first in its own commit group, and its hand-over to the dQ writer (with the
# ordered finish: waiting for the earlier contributors' partial sum, adding, staging) runs while
# dV and dK still compute; off, dV and dK first and the hand-over after all three. Same bits. The
# default uses it only with the ordered finish (mean Lk <= 192 without cluster pairs: s = 0.5,
# L = 256; L = 512 too until the eleventh session lowered the limit from 384), so those are the sets
# compared; FULL / OFF / SETS override, e.g.
# FULL=sm90-bwd-flags8277 OFF=sm90-bwd-flags85 SETS=self-s1.0 for the accumulator path.
#   usage: experiments/ablate_dq_first.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-dq-first}
SETS=${SETS:-self-s0.5-L256,self-s0.5-L512}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-dq-first "$FULL,$OFF" "$SETS" bwd
