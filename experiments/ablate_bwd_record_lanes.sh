#!/usr/bin/env bash
# ablate_bwd_record_lanes.sh — the backward's next tile record loaded over the lanes at the end of
# a tile's steps (kBwdRecordLanes: one field per lane, gathered by shuffles at the next tile's top)
# against the record read at the tile's top. Same bits. On by default with the ordered finish only
# (s = 0.5 L = 256, a few steps per tile); on the other sets both names run one kernel. SETS
# overrides.
#   usage: experiments/ablate_bwd_record_lanes.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s0.5-L256}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-bwd-record-lanes"
bench ablation-bwd-record-lanes "sm90,sm90-no-bwd-record-lanes" "$SETS" bwd
