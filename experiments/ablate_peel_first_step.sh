#!/usr/bin/env bash
# ablate_peel_first_step.sh — the forward's first step of a tile (whose PV starts O over) peeled out
# of the step loop, on and off (kFwdPeelFirstStep; same O bits). The default peels from a mean Lk
# of 768 (fwd_config.h kFwdPeelMinMeanLenK); below it both names run the same kernel, so the long
# self sets are the comparison and the short ones the control. One bench call.
#   usage: experiments/ablate_peel_first_step.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-peel-first-step}
SETS=${SETS:-self-s1.0,self-s0.5}
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-peel-first-step "$FULL,$OFF" "$SETS" "$DIRS"
