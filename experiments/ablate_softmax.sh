#!/usr/bin/env bash
# ablate_softmax.sh — what dropping the softmax frees: the full GDPA kernel against the same kernel
# computing softmax attention (running max, exp2, row sums and the rescale of O), on the sets where
# TARGETS.md has softmax references (self s = 1.0 and cross short-KV), forward and backward.
#   usage: experiments/ablate_softmax.sh [OUT]       (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-softmax}
SETS=${SETS:-self-s1.0,cross-Lk256}
DIRS=${DIRS:-both}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-softmax "$FULL,$OFF" "$SETS" "$DIRS"
