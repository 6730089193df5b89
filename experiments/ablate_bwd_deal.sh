#!/usr/bin/env bash
# ablate_bwd_deal.sh — the backward's tile list with each round handed to the CTAs by modelled load
# (the default where the empty-half skip runs: a KV tile of at most 64 keys at 0.6 of a whole one)
# against the snake (sm90-bwd-half100) and two other modelled costs. Only jagged keys have such
# tiles, so the self s = 0.5 sets with SELF_KV=jagged (with the seed's dense keys every name runs
# the same list). Backward only; one bench call, the kernels interleaved.
#   usage: experiments/ablate_bwd_deal.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-bwd-half100,sm90-bwd-half50,sm90-bwd-half75}
SETS=${SETS:-self-s0.5}
SELF_KV=${SELF_KV:-jagged}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
"$GDPA" schedule --sms 132 --self-kv "$SELF_KV" --out "$OUT" | sed -n '/sm90 backward/,$p'
bench ablation-bwd-deal "$FULL,$OFF" "$SETS" bwd
