# lib.sh — helpers shared by the experiment scripts; sourced, never run on its own.
# shellcheck shell=bash
#
# Every script follows one shape: `script.sh [OUT]` (OUT defaults to experiments/results), names its
# kernels in variables at its top, checks before touching the GPU that this build of gdpa knows
# every kernel and option it is about to use, then makes `gdpa bench` calls whose JSON lands in OUT.
# One bench call per comparison is the rule: the kernels in it see the same inputs, the same
# ceilings and the same clocks, so their ratio is meaningful even when absolute numbers drift.

# Run from the repository root whatever the caller's directory: the binary, the NVRTC kernel
# sources and the default OUT are all found relative to it. An OUT given on the command line is
# still taken relative to the caller's directory.
EXP_CALLER_DIR=$PWD
EXP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$EXP_ROOT" || exit 2

GDPA=${GDPA:-build/gdpa}
# 1: the kernels of a bench call are timed in alternating rounds (`gdpa bench --interleave`), the
# fair way to compare variants of one kernel. reproduce.sh sets 0: its absolute numbers are each
# kernel's sustained speed, timed alone (a low-power kernel in the same rounds would let the GPU
# leave its power cap between the other's calls).
BENCH_INTERLEAVE=${BENCH_INTERLEAVE:-1}
# The self sets' keys (`gdpa bench --self-kv`): dense, the seed's benchmark (every Lk = L), or jagged
# (Lk = Lq, what the project measured before its thirty-eighth session, and the sets with partial
# last KV tiles). The ablations of key-side and short-KV features set jagged before sourcing this.
SELF_KV=${SELF_KV:-dense}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-0}  # seconds per bench call, 0 = none; a hung kernel then cannot eat a session
EXP_NAME=$(basename "$0" .sh)
EXP_T0=$(date +%s)

say() { printf '[%s %4ds] %s\n' "$EXP_NAME" "$(( $(date +%s) - EXP_T0 ))" "$*"; }
die() { say "error: $*" >&2; exit 2; }

# The binary is built on demand so a script works on a fresh checkout; an existing one is trusted
# (rebuilding here would race with a build the caller may be running).
require_gdpa() {
  if [ ! -x "$GDPA" ]; then
    say "building $GDPA"
    make --no-print-directory build/gdpa >/dev/null || die "cannot build $GDPA"
  fi
}

# `gdpa bench` rejects an unknown kernel only after it has measured the ceilings and generated the
# first set, and rejects it mid-run, after earlier kernels' rows are lost with the process. So the
# scripts check their names first, before any GPU time is spent (GDPA_SKIP_PREFLIGHT=1 skips it).
# Kernel and activation names are resolved exactly as bench resolves them, by `gdpa precompile
# --dry-run` (no GPU, nothing compiled): a search of the binary's bytes, as this check once was, let a
# misspelt name through whenever it was part of a real one (sm90-fwd-tails-sid16 inside
# sm90-fwd-tails-side, gelu_tay inside gelu_taylor6).
require_kernels() {  # require_kernels a,b,c
  require_resolved kernel "$1" \
    "Set the script's kernel variable (e.g. OFF=... or KERNELS=...) to names this build has." --kernels "$1"
}

require_activations() {  # require_activations a,b,c
  require_resolved activation "$1" "Set ACTS to names this build has." --kernels baseline --acts "$1"
}

require_resolved() {  # require_resolved WHAT a,b,c HINT [gdpa precompile options naming them]
  [ "${GDPA_SKIP_PREFLIGHT:-0}" = 1 ] && return 0
  local what=$1 names=$2 hint=$3 why
  shift 3
  why=$("$GDPA" precompile --bench-only --dry-run "$@" 2>&1 >/dev/null) ||
    die "this build of gdpa does not know every $what in $names: ${why#*error: }. $hint" \
      "(GDPA_SKIP_PREFLIGHT=1 skips this check.)"
}

# Same reasoning for options the CLI may not have yet (e.g. --len-k).
has_bench_option() {  # has_bench_option len-k
  "$GDPA" bench --help 2>/dev/null | grep -qF -- "--$1"
}

# bench STEM KERNELS SETS DIRS [extra bench options...]
#   DIRS: both | fwd | bwd.  Prints a progress line before and after; gdpa itself prints one line per
#   set and kernel on stderr while it runs.
bench() {
  local stem=$1 kernels=$2 sets=$3 dirs=$4
  shift 4
  local dir_opt=()
  case $dirs in
    both) ;;
    fwd) dir_opt=(--fwd-only) ;;
    bwd) dir_opt=(--bwd-only) ;;
    *) die "bench: direction must be both, fwd or bwd, not '$dirs'" ;;
  esac
  [ "$BENCH_INTERLEAVE" = 1 ] && has_bench_option interleave && dir_opt+=(--interleave)
  if has_bench_option self-kv; then
    dir_opt+=(--self-kv "$SELF_KV")
  elif [ "$SELF_KV" != jagged ]; then  # a build from before the option measures jagged keys only
    die "SELF_KV=$SELF_KV needs \`gdpa bench --self-kv\`, which this build lacks; run with SELF_KV=jagged"
  fi
  local cmd=("$GDPA" bench --kernels "$kernels" --sets "$sets" "${dir_opt[@]}" --out "$OUT" --stem "$stem" "$@")
  [ "$BENCH_TIMEOUT" != 0 ] && cmd=(timeout --signal=KILL "$BENCH_TIMEOUT" "${cmd[@]}")
  say "start  $stem: kernels $kernels, sets $sets, $dirs${*:+ $*}"
  local t0 rc=0
  t0=$(date +%s)
  "${cmd[@]}" || rc=$?
  [ $rc -eq 0 ] || die "$stem: gdpa bench exited with $rc"
  say "done   $stem in $(( $(date +%s) - t0 ))s"
}

# bench_lk_sweep STEM_PREFIX KERNELS SETS_AT_256 DIRS — one bench call per Lk in $LK_LIST, stem
# <prefix>-lk<N>. Lk = 256 runs SETS_AT_256 (the seed's own cross sets need no option); any other Lk
# runs the cross sets with `--len-k N` (it changes only them: other sets would be re-measured for
# nothing).
bench_lk_sweep() {
  local prefix=$1 kernels=$2 sets256=$3 dirs=$4 lk n=0
  for lk in $LK_LIST; do
    if [ "$lk" != 256 ] && ! has_bench_option len-k; then
      die "Lk = $lk needs \`gdpa bench --len-k\`, which this build lacks; run with LK_LIST=256"
    fi
  done
  for lk in $LK_LIST; do
    n=$((n + 1))
    say "[$n/$(wc -w <<<"$LK_LIST")] Lk = $lk"
    if [ "$lk" = 256 ]; then
      bench "$prefix-lk$lk" "$kernels" "$sets256" "$dirs"
    else
      bench "$prefix-lk$lk" "$kernels" cross "$dirs" --len-k "$lk"
    fi
  done
}

exp_init() {  # exp_init "$@" — the OUT argument and the binary
  OUT=${1:-experiments/results}
  if [ -n "${1:-}" ] && [ "${OUT#/}" = "$OUT" ]; then OUT=$EXP_CALLER_DIR/$OUT; fi
  mkdir -p "$OUT"
  require_gdpa
}
