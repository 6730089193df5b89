#!/usr/bin/env bash
# ablate_whole_batch_branch.sh — how the forward's step branches on its PV's accumulate flag (the
# tile's first PV starts O over): before the GEMM batch, between two whole batches
# (kFwdWholeBatchBranch; the default from a mean Lk of 192), or between two PV sequences after the
# QK^T (sm90-no-whole-batch-branch). Same O bits. Below the mean-Lk limit both names run one
# kernel: the self s = 0.5 set at L = 256 is the control. One bench call.
#   usage: experiments/ablate_whole_batch_branch.sh [OUT]      (OUT default: experiments/results)
set -euo pipefail
FULL=${FULL:-sm90}
OFF=${OFF:-sm90-no-whole-batch-branch}
SETS=${SETS:-self-s1.0,self-s0.5,cross}
SELF_KV=${SELF_KV:-jagged}  # self sets with Lk = Lq (jagged keys), as this ablation was measured; dense: the seed's
DIRS=${DIRS:-fwd}
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "$FULL,$OFF"
bench ablation-whole-batch-branch "$FULL,$OFF" "$SETS" "$DIRS"
