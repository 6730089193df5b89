#!/usr/bin/env bash
# validate.sh — one pass over everything that needs the GPU, with a log per step under OUTDIR:
# build, unit + GPU tests, `gdpa check` for each kernel, compute-sanitizer on a small jagged case,
# SASS of the default variants, and the benchmark. Each step has a time limit so a hang in one
# kernel cannot eat the whole session. Usage: experiments/validate.sh OUTDIR [steps...]
#   steps (default all): build tests check-baseline check-unfused check-sm90-fwd check-sm90-bwd
#                        check-sm90-bwd-variants sanitize sass bench-fwd bench-bwd bench-all
set -u
out=${1:?usage: validate.sh OUTDIR [steps...]}
shift
mkdir -p "$out"
steps=${*:-build tests check-baseline check-unfused check-sm90-fwd check-sm90-bwd check-sm90-bwd-variants sanitize sass bench-all}
jobs=$(nproc)
g=build/gdpa

step() {  # step NAME LIMIT_SECONDS command...
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s)
  timeout --signal=KILL "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  printf '%-16s rc=%-3d %4ds  %s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(tail -n 1 "$out/$name.log" | cut -c1-110)"
}

small="--batch 5 --len 300 --sparsity 0.5 --heads 2 --sample 5 --reps 3 ${RUN_FLAGS:-}"
for s in $steps; do
  case $s in
    build) step build 400 make -j"$jobs" build/gdpa build/gdpa_tests ;;
    tests) step tests 400 "$g"_tests ;;
    check-baseline) step check-baseline 400 "$g" check --kernel baseline --seed 11 ;;
    check-unfused) step check-unfused 300 "$g" check --kernel unfused-cublas --seed 12 ;;
    check-sm90-fwd) step check-sm90-fwd 300 "$g" check --kernel sm90 --fwd-only --seed 13 ;;
    check-sm90-bwd) step check-sm90-bwd 300 "$g" check --kernel sm90 --bwd-only --seed 14 ;;
    # The backward's other dQ paths: finished in the kernel on every case (the default does so only
    # for a mean Lk <= 192), and the unordered adds.
    check-sm90-bwd-variants)
      step check-dq-finish 300 "$g" check --kernel sm90-dq-finish-always --bwd-only --seed 15
      step check-unordered 300 "$g" check --kernel sm90-unordered-dq --bwd-only --seed 16
      step check-dq-follow 300 "$g" check --kernel sm90-dq-follow-always --bwd-only --seed 17 ;;
    sanitize)
      # The default kernels, then the accumulator path with the dQ follower beside the backward
      # (the small case's default finishes dQ in the kernel instead).
      for tool in memcheck racecheck synccheck; do
        step "san-$tool" 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$g" run $small --kernel sm90
        step "san-follow-$tool" 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$g" run $small \
          --kernel sm90-dq-follow-always
      done ;;
    sass) step sass 300 make sass ;;
    bench-fwd) step bench-fwd 500 "$g" bench --fwd-only --out "$out" ;;
    bench-bwd) step bench-bwd 500 "$g" bench --bwd-only --out "$out" ;;
    bench-all) step bench-all 550 "$g" bench --out "$out" ;;
    *) echo "unknown step $s" ;;
  esac
done
