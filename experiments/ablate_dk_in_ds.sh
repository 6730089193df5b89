#!/usr/bin/env bash
# ablate_dk_in_ds.sh — where the backward's epilogue stages dK on the accumulator path
# (kBwdDkInDs): on, in this warpgroup's halves of the two dS^T exchange buffers (free once the
# tile's last dQ jobs have read them), next to dV's buffer; off, in dV's buffer after dV's TMA store
# has read it. Same bits. Only the accumulator path has it (mean Lk > 192: self s = 1 from L = 512,
# s = 0.5 from L = 1024), so those are the sets compared; SETS overrides.
#   usage: experiments/ablate_dk_in_ds.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-self-s1.0-L512,self-s1.0-L1024,self-s1.0-L2048,self-s0.5-L1024,self-s0.5-L2048}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-dk-in-ds"
bench ablation-dk-in-ds "sm90,sm90-no-dk-in-ds" "$SETS" bwd
