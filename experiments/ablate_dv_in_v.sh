#!/usr/bin/env bash
# ablate_dv_in_v.sh — where the backward stages a tile's dV on the accumulator path (kBwdDvInV):
# on, in this warpgroup's own rows of the V tile at the start of the tile's last dQ job, with K and
# V given back before that job's hand-over; off, in the next dQ job's staging buffer once the writer
# has read the job before. Same bits. The default takes it on the accumulator path up to a mean Lk
# of 1536 (self s = 1 L = 512 / 1024, s = 0.5 from L = 512), so those are the sets compared; SETS
# overrides (at self s = 1 L = 2048 both names run the same kernel).
#   usage: experiments/ablate_dv_in_v.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s1.0-L512,self-s1.0-L1024,self-s0.5-L512,self-s0.5-L1024,self-s0.5-L2048}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-dv-in-v"
bench ablation-dv-in-v "sm90,sm90-no-dv-in-v" "$SETS" bwd
