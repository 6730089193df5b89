#!/usr/bin/env bash
# ablate_proxy_fences.sh — where the backward's generic -> async proxy fences run, two switches in
# one call: the dQ jobs staged for the writer warp fenced once by the writer after its wait
# (kBwdDqFenceAtWriter, vs sm90-no-dq-fence-at-writer: every consumer thread after its stores; the
# default on the accumulator path only), and the dS^T halves fenced by each reader after its wait
# before the dQ wgmma (kBwdDsFenceAtReader, vs sm90-no-ds-fence-at-reader: every storing thread).
# Same bits. Every set, backward only; where the default leaves the writer's fence off (pairs, the
# ordered finish) sm90 and sm90-no-dq-fence-at-writer run one kernel.
#   usage: experiments/ablate_proxy_fences.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-dq-fence-at-writer,sm90-no-ds-fence-at-reader}
SETS=${SETS:-self,cross}
DIRS=${DIRS:-bwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-proxy-fences "$FULL,$OFF" "$SETS" "$DIRS"
