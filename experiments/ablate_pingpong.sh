#!/usr/bin/env bash
# ablate_pingpong.sh — pingpong scheduling of the two consumer warpgroups (they take turns issuing
# GEMMs, so one's activation runs under the other's tensor-core work) on and off, forward and
# backward (kFwdPingpong, kBwdPingpong), on all twelve seed sets.
#   usage: experiments/ablate_pingpong.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-pingpong}
SETS=${SETS:-self,cross}
DIRS=${DIRS:-both}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-pingpong "$FULL,$OFF" "$SETS" "$DIRS"
