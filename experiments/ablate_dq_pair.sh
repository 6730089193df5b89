#!/usr/bin/env bash
# ablate_dq_pair.sh — the backward's KV tiles in cluster pairs on and off (kBwdPair): where every
# sequence has two KV tiles (128 < Lk <= 256, no mask), clusters of two CTAs run them side
# by side, and rank 0 copies its part of each dQ block into rank 1's shared memory, which finishes
# the block; off, the same blocks go through the fp32 accumulator in the fixed KV order and rank 1's
# CTA loads the partial sum back (kBwdDqFinish). Same bits. The default (sm90) pairs where the mean
# Lq is at least 256 (bwd_config.h kBwdPairMinMeanLenQ): the cross sets and self s = 1, L = 256.
# Those sets and self s = 0.5, L = 256 (not eligible: some Lk <= 128), backward only, one bench call.
#   usage: experiments/ablate_dq_pair.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-dq-pair}
SETS=${SETS:-cross,self-s1.0-L256,self-s0.5-L256}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-dq-pair "$FULL,$OFF" "$SETS" bwd
