#!/usr/bin/env bash
# ablate_zigzag.sh — zigzag tile scheduling against grid order and longest-first, on the jagged
# s = 0.5 sets (uniform lengths give every tile the same work, so there is nothing to balance),
# forward and backward, plus the per-SM load skew each policy gives on paper (`gdpa schedule`).
# The seed's sets by default (dense keys: the backward's KV tiles differ, the forward's query tiles
# do not); SELF_KV=jagged for keys as jagged as the queries.
#   usage: experiments/ablate_zigzag.sh [OUT]        (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-grid-order,sm90-longest-first}
SETS=${SETS:-self-s0.5}
DIRS=${DIRS:-both}
SMS=${SMS:-132}  # the H200's SM count; `gdpa schedule` needs no GPU, so it is told
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"

say "per-SM load skew of each policy ($SMS SMs, host only)"
"$GDPA" schedule --sms "$SMS" --self-kv "$SELF_KV" --out "$OUT"
bench ablation-zigzag "$FULL,$OFF" "$SETS" "$DIRS"
