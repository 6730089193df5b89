#!/usr/bin/env bash
# ablate_all.sh — every ablation and the real-vs-synthetic experiment, one after another. A script
# that fails (say, a kernel variant this build does not have yet) is reported and the rest still
# run; the exit status is non-zero if any failed.
#   usage: experiments/ablate_all.sh [OUT]           (OUT default: experiments/results)
#   ONLY="zigzag pingpong" experiments/ablate_all.sh   runs a subset
set -uo pipefail
ONLY=${ONLY:-zigzag outer_pipeline kv_reuse half_fold skip_empty_half whole_batch_branch stmatrix_o narrow_last_block record_lanes tile_records bwd_record_lanes proxy_fences stmatrix_bwd dq_finish dq_follow dq_pair dq_tma_store dq_first dq_two_stage early_act dk_in_ds dv_in_v pair_two_stage pair_dv_in_ds pair_late_store_wait pair_rank1_dv_in_ds pair_rank0_late_store_wait first_step_init_acc dq_red pingpong intra_overlap activation act_mix softmax real_vs_synthetic}
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-}
if [ -n "$out" ] && [ "${out#/}" = "$out" ]; then out=$PWD/$out; fi

failed=()
n=0
total=$(wc -w <<<"$ONLY")
t0=$(date +%s)
for name in $ONLY; do
  n=$((n + 1))
  script=$here/ablate_$name.sh
  [ -f "$script" ] || script=$here/$name.sh
  if [ ! -f "$script" ]; then
    echo "[ablate_all] [$n/$total] no script for '$name'" >&2
    failed+=("$name")
    continue
  fi
  echo "[ablate_all] [$n/$total] $(basename "$script") ($(( $(date +%s) - t0 ))s elapsed)"
  bash "$script" ${out:+"$out"} || failed+=("$name")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "[ablate_all] failed: ${failed[*]} ($(( $(date +%s) - t0 ))s)" >&2
  exit 1
fi
echo "[ablate_all] all $total done in $(( $(date +%s) - t0 ))s"
