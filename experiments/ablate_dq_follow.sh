#!/usr/bin/env bash
# ablate_dq_follow.sh — the backward's dQ conversion beside the kernel on and off (kBwdDqFollow):
# the persistent grid leaves a few SMs to gdpa_bwd_dq_follow, which converts each fp32 dQ block
# once its last add has landed, instead of the dq_convert pass reading the whole accumulator back
# after the kernel. Same bits. Only the deterministic accumulator path has it (self sets from
# L = 512); elsewhere both rows run the same kernels. All twelve seed sets, backward only,
# fast_gelu, one bench call.
#   usage: experiments/ablate_dq_follow.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-dq-follow}
SETS=${SETS:-self-s1.0,self-s0.5,cross}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-dq-follow "$FULL,$OFF" "$SETS" bwd
