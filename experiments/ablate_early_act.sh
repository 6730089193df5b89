#!/usr/bin/env bash
# ablate_early_act.sh — the backward's activation under the dP^T product (kBwdEarlyAct): on, S^T
# and dP^T are two commit groups and P^T and act' are computed once S^T has landed, while dP^T
# still runs; off, both are waited for first. Same bits. The default keeps it where dQ is
# finished in the kernel: cluster pairs (cross Lk = 256, self L = 256) and the ordered finish
# (s = 0.5 L = 256), so those are the sets compared; SETS overrides (explicit flags, e.g.
# sm90-bwd-flagsN, reach the accumulator path).
#   usage: experiments/ablate_early_act.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
SETS=${SETS:-cross,self-s1.0-L256,self-s0.5-L256}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90,sm90-no-early-act"
bench ablation-early-act "sm90,sm90-no-early-act" "$SETS" bwd
