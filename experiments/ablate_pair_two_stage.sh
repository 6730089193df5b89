#!/usr/bin/env bash
# ablate_pair_two_stage.sh — how rank 0 of a backward KV-tile pair stages its dQ jobs
# (kBwdPairTwoStage): on, alternately in its staging and its partial-sum buffer (rank 0 receives
# nothing), so that a consumer stages its next job while rank 1 has not yet read the previous copy;
# off, every job in the staging buffer, given back only once rank 1 has read the copy (and dV, at a
# tile's end, in the partial-sum buffer: kBwdPairDvInDs needs the two buffers). Same bits.
# Only pairs have it (every Lk in (128, 256], mean Lq >= 256: self s = 1 L = 256 and the cross
# sets), so those are the sets compared; SETS overrides.
#   usage: experiments/ablate_pair_two_stage.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s1.0-L256,cross}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-pair-two-stage"
bench ablation-pair-two-stage "sm90,sm90-no-pair-two-stage" "$SETS" bwd
