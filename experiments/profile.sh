#!/usr/bin/env bash
# profile.sh — Nsight Compute profile of the kernels of one `gdpa run` problem.
# Usage: experiments/profile.sh OUT NAME KERNEL_REGEX SET [gdpa run options...]
#   OUT           folder for the report and its text pages
#   NAME          file stem (OUT/NAME.ncu-rep, OUT/NAME.details.csv)
#   KERNEL_REGEX  which kernel, e.g. '^gdpa_bwd$' or 'dq_convert'. ncu counts the skip and the count
#                 over all launches the regex matches together, so a regex matching several kernels
#                 profiles only the first of them after the warm-ups: profile one kernel per call.
#   SET           ncu section set: basic, detailed or full
# Example: experiments/profile.sh prof bwd-L256 '^gdpa_bwd$' full --len 256 --sparsity 1
#
# The run does two warm-up launches and one timed launch of each direction (--reps 1); the profile
# skips the kernel's two warm-ups. --sample 1 keeps the CPU reference check to one sequence
# (--sample 0 would check every sequence of a benchmark-sized batch: many minutes). Clocks are left
# to the GPU (--clock-control none): the benchmarks run at the clocks the GPU chooses, so the
# profile should too.
set -u
out=${1:?usage: profile.sh OUT NAME KERNEL_REGEX SET [run options]}
name=${2:?name}
regex=${3:?kernel regex}
set_name=${4:?section set}
shift 4
mkdir -p "$out"
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
[ -x build/gdpa ] || make --no-print-directory build/gdpa >/dev/null || exit 2
command -v ncu >/dev/null || { echo "profile.sh: ncu (Nsight Compute) is not on PATH" >&2; exit 2; }

ncu --clock-control none --kernel-name "regex:$regex" --launch-skip 2 --launch-count 1 --set "$set_name" \
  --import-source no -f -o "$out/$name" build/gdpa run --sample 1 --reps 1 "$@" >"$out/$name.run.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  echo "profile.sh: ncu exited with $rc (see $out/$name.run.log)" >&2
  tail -n 5 "$out/$name.run.log" >&2
  exit $rc
fi
ncu --import "$out/$name.ncu-rep" --page details --csv >"$out/$name.details.csv"
echo "profile.sh: $out/$name.ncu-rep, $out/$name.details.csv"
