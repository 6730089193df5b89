#!/usr/bin/env bash
# ablate_pair_dv_in_ds.sh — where rank 0 of a backward KV-tile pair stages dV at a tile's end
# (kBwdPairDvInDs, with kBwdPairTwoStage): on, in its warpgroup's halves of the two dS^T buffers,
# free once this CTA's last dQ jobs have read them; off, in the buffer of its next dQ job, once
# rank 1 has read the job before the tile's last. Same bits. Pairs only (every Lk in (128, 256],
# mean Lq >= 256: self s = 1 L = 256 and the cross sets); SETS overrides.
#   usage: experiments/ablate_pair_dv_in_ds.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s1.0-L256,cross}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-pair-dv-in-ds"
bench ablation-pair-dv-in-ds "sm90,sm90-no-pair-dv-in-ds" "$SETS" bwd
