#!/usr/bin/env bash
# trace_bwd.sh — the backward's event traces on seed-like problems: experiments/trace.sh, DIR=bwd.
#   usage: experiments/trace_bwd.sh [OUT]      (OUT default: experiments/results)
DIR=bwd exec "$(dirname "$0")/trace.sh" "$@"
