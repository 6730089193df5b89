#!/usr/bin/env bash
# ablate_dq_red.sh — how the unordered backward adds its dQ jobs into the fp32 accumulator
# (kBwdDqRed): on, each consumer adds its job straight from its registers with vector reductions
# (red.global.add.v4.f32); off, it stages the job in shared memory for the writer warp's bulk
# reduce. Unordered mode only (`sm90-unordered-dq` against `sm90-unordered-no-red`; the
# deterministic default never has it), and only on the accumulator path from a mean Lk of 384
# (the host's rule): self s = 1 L >= 512 and s = 0.5 L >= 1024. SETS overrides.
#   usage: experiments/ablate_dq_red.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90-unordered-dq,sm90-unordered-no-red"
bench ablation-dq-red "sm90-unordered-dq,sm90-unordered-no-red" "$SETS" bwd
