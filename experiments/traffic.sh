#!/usr/bin/env bash
# traffic.sh — the bytes a kernel moves, next to its time and clock: Nsight Compute counts of one
# launch per kernel of the same `gdpa run` problem (DRAM bytes read and written, bytes through L2,
# the kernel's duration, the SMs' mean clock), then one line per kernel (traffic_summary.py).
#   usage: KERNELS=a,b[,..] [DIR=fwd|bwd] experiments/traffic.sh OUT [gdpa run problem options...]
#   e.g.   KERNELS=sm90,sm90-no-skip-empty-half experiments/traffic.sh prof --len 2048 --sparsity 0.5 --len-k 2048
#
# Why these counts: the long forwards run at the 700 W cap, where bytes cost clock (PERF_NOTES,
# forty-first session: the s = 0.5 L = 2048 forward moved 2.6 times the s = 1 forward's L2 bytes per
# FLOP and sustained 5 % less clock). Comparing variants by time alone cannot say whether one moves
# fewer bytes; this can, from one launch each. The launch profiled is the first after the run's two
# warm-ups; clocks are left to the GPU (--clock-control none), as in the benchmarks. ncu's own
# "==PROF==" lines are dropped from the CSV, which keeps the program's printout and the metric rows.
set -u
KERNELS=${KERNELS:?name the kernels, e.g. KERNELS=sm90,sm90-no-skip-empty-half}
DIR=${DIR:-fwd}
out=${1:?usage: traffic.sh OUT [gdpa run problem options]}
shift
case $DIR in
  fwd) regex='^gdpa_fwd$'; dir_opt=(--no-backward) ;;
  bwd) regex='^gdpa_bwd$'; dir_opt=() ;;
  *) echo "traffic.sh: DIR must be fwd or bwd (got $DIR)" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
[ -x build/gdpa ] || make --no-print-directory build/gdpa >/dev/null || exit 2
command -v ncu >/dev/null || { echo "traffic.sh: ncu (Nsight Compute) is not on PATH" >&2; exit 2; }

metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
metrics+=,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
stamp=$(date +%Y%m%d-%H%M%S)
files=()
IFS=, read -r -a kernels <<<"$KERNELS"
for k in "${kernels[@]}"; do
  csv="$out/traffic-$DIR-$k-$stamp.csv"
  ncu --clock-control none --kernel-name "regex:$regex" --launch-skip 2 --launch-count 1 --metrics "$metrics" --csv \
    build/gdpa run --kernel "$k" --sample 1 --reps 1 "${dir_opt[@]}" "$@" 2>&1 | grep -v '^==PROF==' >"$csv"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "traffic.sh: ncu exited with $rc for $k (see $csv)" >&2
    tail -n 5 "$csv" >&2
    exit "$rc"
  fi
  files+=("$csv")
done
python3 experiments/traffic_summary.py "${files[@]}"
