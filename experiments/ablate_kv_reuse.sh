#!/usr/bin/env bash
# ablate_kv_reuse.sh — K/V kept resident in shared memory across the consecutive query tiles of one
# (sequence, head) when all its keys fit the K/V ring, on and off, forward. Only short KV qualifies:
# the cross-attention sets (Lk = 256, and 128 and 64 with --len-k) and the self-attention sets at
# L = 256.
#   usage: experiments/ablate_kv_reuse.sh [OUT]      (OUT default: experiments/results)
# Lk other than 256 needs `gdpa bench --len-k N`; set LK_LIST=256 on a build without it.
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-kv-reuse}
SETS=${SETS:-cross,-L256}  # at Lk = 256; "-L256" picks self s=1.0 and s=0.5 at L = 256
DIRS=${DIRS:-fwd}
LK_LIST=${LK_LIST:-256 128 64}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench_lk_sweep ablation-kv-reuse "$FULL,$OFF" "$SETS" "$DIRS"
