#!/usr/bin/env bash
# real_vs_synthetic.sh — production-like jagged lengths (the s = 0.5 sets: Lq uniform in [1, L])
# against uniform ones (s = 1.0: every Lq = L) at the same L, with zigzag scheduling (the full
# kernel) and with grid order: how much of a kernel's speed on uniform benchmarks survives real
# lengths, and how much of the loss the scheduler wins back. Forward and backward.
#   usage: experiments/real_vs_synthetic.sh [OUT]    (OUT default: experiments/results)
set -euo pipefail
ZIGZAG=${ZIGZAG:-sm90}
GRID=${GRID:-sm90-grid-order}
SETS=${SETS:-self-s1.0,self-s0.5}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
DIRS=${DIRS:-both}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$ZIGZAG,$GRID"
bench real-vs-synthetic "$ZIGZAG,$GRID" "$SETS" "$DIRS"
