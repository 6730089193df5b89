#!/usr/bin/env bash
# ablate_record_lanes.sh — the forward's tile records taken a tile ahead, one field per lane
# (kFwdRecordLanes), against loading each record at its tile's top, where ptxas moves the fields to
# uniform registers at once and the warp waits for the load. Same O bits. Every set, forward only.
#   usage: experiments/ablate_record_lanes.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-record-lanes}
SETS=${SETS:-self,cross}
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-record-lanes "$FULL,$OFF" "$SETS" "$DIRS"
