#!/usr/bin/env bash
# trace_fwd.sh — the forward's event traces on seed-like problems: experiments/trace.sh, DIR=fwd.
#   usage: experiments/trace_fwd.sh [OUT]      (OUT default: experiments/results)
DIR=fwd exec "$(dirname "$0")/trace.sh" "$@"
