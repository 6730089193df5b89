#!/usr/bin/env bash
# cuobjdump.sh — runs cuobjdump from wherever this machine has one. The one lookup that the SASS
# tests (verify/tests/sass_tools.cpp), `make sass` / `make deps-sass` and
# experiments/register_probe.sh share, so that they agree on which machines can disassemble.
# Looked for in order: PATH, the toolkit (/usr/local/cuda/bin), the PyPI package
# nvidia-cuda-cuobjdump (nvidia/cu13/bin). That package's cuobjdump runs the nvdisasm beside it by
# name, so its directory goes on PATH as well.
#   usage: verify/tools/cuobjdump.sh ARGS...   cuobjdump ARGS...; exit 127 and a message if none
#          verify/tools/cuobjdump.sh --found   exit 0 if one is found, 1 if not; prints nothing
set -euo pipefail
tool=$(command -v cuobjdump || true)
[ -n "$tool" ] || [ ! -x /usr/local/cuda/bin/cuobjdump ] || tool=/usr/local/cuda/bin/cuobjdump
if [ -z "$tool" ]; then
  dir=$(python3 -c 'import nvidia,os;print(os.path.join(nvidia.__path__[0],"cu13","bin"))' 2>/dev/null || true)
  if [ -n "$dir" ] && [ -x "$dir/cuobjdump" ] && [ -x "$dir/nvdisasm" ]; then  # -sass needs both
    tool=$dir/cuobjdump
    PATH=$dir:$PATH
  fi
fi
if [ "${1:-}" = --found ]; then
  [ -n "$tool" ]
  exit
fi
if [ -z "$tool" ]; then
  echo "cuobjdump not found (make deps-sass installs it)" >&2
  exit 127
fi
exec "$tool" "$@"
