#!/usr/bin/env bash
# ablate_dq_tma_store.sh — how a dQ block the kernel finishes leaves it (kBwdDqTmaStore): on, the
# finishing consumer warpgroup only stages the rounded rows and the dQ writer warp stores them with
# one TMA store; off, the warpgroup's threads copy the rows themselves after a second barrier. Same
# bits. Blocks are finished where the backward finishes dQ in the kernel: cluster pairs (cross sets
# at L >= 512) and the last contributor of the ordered finish (mean Lk <= 192 (384 until the eleventh session): the L = 256 sets,
# cross L = 256 and s = 0.5 L = 512). Those sets, backward only, one bench call.
#   usage: experiments/ablate_dq_tma_store.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-dq-tma-store}
SETS=${SETS:-cross,self-s1.0-L256,self-s0.5-L256,self-s0.5-L512}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-dq-tma-store "$FULL,$OFF" "$SETS" bwd
