#!/usr/bin/env bash
# trace.sh — the event traces of the profiling variants (sm90-bwd-trace, sm90-fwd-trace) on
# seed-like problems, each summarised by trace_bwd.py / trace_fwd.py: the phases of a step, the
# warpgroups' turns, the backward's hand-over and activation in parts and a pair's two ranks apart,
# and what a work tile costs beyond its steps. Writes OUT/trace/<dir>-trace-<problem>-<stamp>.json
# (the summary; the raw .npy stays in a temporary folder unless KEEP_NPY=1). The traced run waits
# for each launch, so its printed time is not the kernel's; the trace covers the first 8 CTAs'
# first 4096 (backward) / 8192 (forward) events per role.
#   usage: experiments/trace.sh [OUT]      (OUT default: experiments/results)
#   DIR=fwd experiments/trace.sh           the forward (default: DIR=bwd; trace_fwd.sh, trace_bwd.sh)
#   PROBLEMS="self-s1-L256 cross-L1024" experiments/trace.sh   runs a subset
set -euo pipefail
DIR=${DIR:-bwd}
case "$DIR" in
  bwd) PROBLEMS=${PROBLEMS:-self-s1-L256 self-s05-L256 self-s1-L512 self-s1-L2048 cross-L1024}
       RUN_OPTS=(); RAN='^backward kernels'; TRACE_VAR=GDPA_BWD_TRACE ;;
  fwd) PROBLEMS=${PROBLEMS:-self-s1-L512 self-s05-L512 self-s1-L2048 cross-L1024}
       RUN_OPTS=(--no-backward); RAN='^forward '; TRACE_VAR=GDPA_FWD_TRACE ;;
  *) echo "DIR must be fwd or bwd (got '$DIR')" >&2; exit 2 ;;
esac
source "$(dirname "$0")/lib.sh"
exp_init "${1:-}"
require_kernels "sm90-$DIR-trace"
command -v python3 >/dev/null || die "trace_$DIR.py needs python3"

# The gdpa run options of each named problem (B = 1152 unless said).
declare -A ARGS=(
  [self-s1-L256]="--len 256 --sparsity 1"
  [self-s05-L256]="--len 256 --sparsity 0.5"
  [self-s1-L512]="--len 512 --sparsity 1"
  [self-s05-L512]="--len 512 --sparsity 0.5"
  [self-s1-L1024]="--len 1024 --sparsity 1 --batch 576"
  [self-s1-L2048]="--len 2048 --sparsity 1 --batch 288"
  [cross-L1024]="--len 1024 --len-k 256 --sparsity 1"
  [cross-L2048]="--len 2048 --len-k 256 --sparsity 1 --batch 576"
)
for name in $PROBLEMS; do
  [ -n "${ARGS[$name]:-}" ] || die "unknown problem '$name' (known: ${!ARGS[*]})"
done

stamp=$(date +%Y%m%d-%H%M)
raw=$(mktemp -d)
mkdir -p "$OUT/trace"
for name in $PROBLEMS; do
  read -r -a opts <<<"${ARGS[$name]}"
  say "trace $name: gdpa run ${opts[*]}"
  env "$TRACE_VAR=$raw/$name.npy" timeout 300 "$GDPA" run --kernel "sm90-$DIR-trace" --sample 1 --reps 2 \
    "${RUN_OPTS[@]}" "${opts[@]}" >"$raw/$name.log" 2>&1 || { tail -5 "$raw/$name.log"; die "gdpa run failed for $name"; }
  # Without a GPU, gdpa run falls back to the CPU reference and writes no trace.
  grep -E "$RAN" "$raw/$name.log" || { tail -3 "$raw/$name.log"; die "no GPU $DIR kernel ran for $name"; }
  [ -s "$raw/$name.npy" ] || die "no trace written for $name"
  python3 "experiments/trace_$DIR.py" "$raw/$name.npy" --json "$OUT/trace/$DIR-trace-$name-$stamp.json"
done
if [ "${KEEP_NPY:-0}" = 1 ]; then
  mv "$raw"/*.npy "$OUT/trace/"
fi
rm -rf "$raw"
say "summaries in $OUT/trace/"
