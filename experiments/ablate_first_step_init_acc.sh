#!/usr/bin/env bash
# ablate_first_step_init_acc.sh — a tile's dV / dK accumulators initialised by the first step's
# first dV / dK wgmma slice (scale-d 0; kBwdFirstStepInitAcc) against 128 zeroing moves per thread
# at the tile's top. The same values (a zero's sign aside). On by default on the accumulator path
# where it reads the tile records (self s = 1 L = 512 / 1024); on the other sets both names run
# one kernel. SETS overrides.
#   usage: experiments/ablate_first_step_init_acc.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s1.0-L512,self-s1.0-L1024}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-first-step-init-acc"
bench ablation-first-step-init-acc "sm90,sm90-no-first-step-init-acc" "$SETS" bwd
