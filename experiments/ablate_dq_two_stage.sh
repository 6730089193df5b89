#!/usr/bin/env bash
# ablate_dq_two_stage.sh — two dQ staging buffers per consumer warpgroup on the backward's
# accumulator path (kBwdDqTwoStage): on, a warpgroup's dQ jobs alternate between its staging
# buffer and its partial-sum buffer (idle without the in-kernel finish), so it stages a job while
# the dQ writer may still add the one before; off, every job waits for the writer's read of the
# previous one. Same bits. Only the accumulator path has it (mean Lk > 384: self s = 1 from
# L = 512, s = 0.5 from L = 1024), so those are the sets compared; SETS overrides.
#   usage: experiments/ablate_dq_two_stage.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s1.0-L512,self-s1.0-L1024,self-s1.0-L2048,self-s0.5-L1024,self-s0.5-L2048}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-dq-two-stage"
bench ablation-dq-two-stage "sm90,sm90-no-dq-two-stage" "$SETS" bwd
