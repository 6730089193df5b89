#!/usr/bin/env bash
# ablate_tile_records.sh — the backward's tile records (kBwdTileRecords): every role reads its work
# tile from a 64-byte record the host built, against deriving it from the tile list and the
# sequence offsets (two dependent loads and the mask's query range at each tile's start). Same
# bits. On by default where dQ is finished in the kernel (the short-KV sets: s = 0.5 L = 256,
# self s = 1 L = 256 and cross, which run cluster pairs) and, since the thirty-third session, on
# the deterministic accumulator path where no KV tile has an empty half up to a mean Lk of 1536
# (self s = 1 L = 512 / 1024); on the other sets both names run one kernel. Every set, backward
# only.
#   usage: experiments/ablate_tile_records.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-tile-records}
SETS=${SETS:-self,cross}
DIRS=${DIRS:-bwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-tile-records "$FULL,$OFF" "$SETS" "$DIRS"
