#!/usr/bin/env bash
# ablate_dq_finish.sh — the backward's in-kernel dQ finish on and off (kBwdDqFinish): the last
# contributor of each dQ block (in the deterministic KV order) converts the block itself from the
# partial sum the TMA unit loads into shared memory, instead of adding into the fp32 accumulator
# for the separate dq_convert pass to read back. Same bits. The default (sm90) finishes only where
# the mean KV length is at most 384 (bwd_config.h kBwdDqFinishMaxMeanLenK); sm90-no-dq-finish
# never does, sm90-dq-finish-always always does. All twelve seed sets, backward only, fast_gelu,
# one bench call.
#   usage: experiments/ablate_dq_finish.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-dq-finish,sm90-dq-finish-always}
SETS=${SETS:-self-s1.0,self-s0.5,cross}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-dq-finish "$FULL,$OFF" "$SETS" bwd
