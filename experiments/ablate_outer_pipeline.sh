#!/usr/bin/env bash
# ablate_outer_pipeline.sh — outer-loop pipelining (double-buffered Q, the next tile's first QK^T
# issued before this tile's epilogue) on and off, on cross-attention with short KV, forward: with
# Lk = 256 a query tile has only two KV steps, so the per-tile prologue and epilogue this hides are
# a large share of the time; Lk = 128 and 64 make that share larger still.
#   usage: experiments/ablate_outer_pipeline.sh [OUT]    (OUT default: experiments/results)
# Lk other than 256 needs `gdpa bench --len-k N`; set LK_LIST=256 on a build without it.
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-outer-pipeline}
SETS=${SETS:-cross}
DIRS=${DIRS:-fwd}
LK_LIST=${LK_LIST:-256 128 64}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench_lk_sweep ablation-outer-pipeline "$FULL,$OFF" "$SETS" "$DIRS"
