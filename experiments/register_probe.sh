#!/usr/bin/env bash
# register_probe.sh — does a kernel still fit its registers after an edit? Compiles a kernel's
# benchmark variants from a scratch copy of the kernel sources, once as they are and once per sed
# expression applied to one file there, and prints per variant the spill instructions in its SASS
# (LDL / STL) and ptxas's notes that it serialized the variant's wgmmas (C7510 / C7511 / C7520).
# No GPU needed: NVRTC and cuobjdump run here, and the tree's own sources are never touched.
#
# Why: a register budget (setmaxnreg, a fourth warpgroup's share, a second P buffer dropped) is
# decided by what ptxas makes of the whole kernel, and a spill or a serialized wgmma costs more
# than any schedule gains (PERF_NOTES: the narrow last block, the head pairs, the sibling tails).
#   usage: experiments/register_probe.sh KERNEL FILE SED_EXPR [SED_EXPR ...]
#   e.g.   experiments/register_probe.sh sm90-no-intra-overlap kernels/sm90/gdpa_fwd.cu \
#            's/kConsumerRegs = 240;/kConsumerRegs = 200;/'
# KERNEL: a registry name (`gdpa precompile --kernels`); FILE: relative to the repository root,
# under kernels/ or ptx/. An expression that changes nothing is an error (a probe of an edit that
# did not happen would report the unedited kernel).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ $# -ge 3 ] || die "usage: experiments/register_probe.sh KERNEL FILE SED_EXPR [SED_EXPR ...]"
kernel=$1 file=$2
shift 2
case $file in kernels/* | ptx/*) ;; *) die "$file: the probe copies kernels/ and ptx/ only" ;; esac
[ -f "$file" ] || die "$file: no such file"
require_gdpa
require_kernels "$kernel"
# cuobjdump found where the SASS tests find it.
cuobjdump=$EXP_ROOT/verify/tools/cuobjdump.sh
"$cuobjdump" --found || die "cuobjdump not found (make deps-sass installs it)"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for expr in "$@"; do  # every edit checked before anything is compiled
  sed -e "$expr" "$file" >"$scratch/edited" 2>"$scratch/sed.err" || die "'$expr': $(cat "$scratch/sed.err")"
  cmp -s "$file" "$scratch/edited" && die "'$expr' changes nothing in $file"
done

# probe LABEL [SED_EXPR]: one compile of the kernel's variants, one line per variant.
probe() {
  local label=$1 expr=${2:-} root=$scratch/root cache=$scratch/cache
  rm -rf "$root" "$cache"
  mkdir -p "$root"
  cp -r kernels ptx "$root/"
  [ -z "$expr" ] || sed -i -e "$expr" "$root/$file"
  GDPA_ROOT=$root GDPA_CACHE=$cache "$GDPA" precompile --kernels "$kernel" --bench-only >/dev/null ||
    die "compiling $kernel failed with '$expr'"
  local name cubin variant spills serial
  for name in "$cache"/*.name; do
    cubin=${name%.name}.cubin
    # gdpa_fwd<DTYPE, D, ACT, MASK, FLAGS> from the mangled name: the template arguments in order.
    variant=$(sed -E 's/^_ZN4gdpa4sm90[0-9]+([a-z_0-9]+)I(.*)EEvN.*$/\1 \2/; s/L[ixb]([0-9]+)E/\1,/g; s/,$//' "$name")
    spills=$("$cuobjdump" -sass "$cubin" | grep -cE '\b(LDL|STL)' || true)
    serial=$(grep -acE 'C75(10|11|20)' "${name%.name}.log" || true)
    printf '%-8s %-36s spill instructions %4d   serialized-wgmma notes %d\n' "$label" "$variant" "$spills" "$serial"
  done | sort -k2
}

say "$kernel: the benchmark variants, as the tree has them, then with each edit of $file"
probe "as is"
n=0
for expr in "$@"; do
  n=$((n + 1))
  say "edit $n: $expr"
  probe "edit $n" "$expr"
done
