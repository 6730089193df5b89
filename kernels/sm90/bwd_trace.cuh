// bwd_trace.cuh — event timestamps of the backward's roles (kBwdTrace, a profiling variant).
//
// Where a step's time goes cannot be read off ncu's averages: the short sets spend it at the tile
// boundary, which a sampling profiler smears over the whole kernel. With kBwdTrace one thread of
// each consumer warpgroup and the producer of the first kBwdTraceCtas CTAs writes (SM cycle
// counter, event, step, global ns) at fixed points of its loop; experiments/trace_bwd.py turns that
// into per-step phase times and the cost of a tile boundary. Without the flag the tracer is an
// empty object and compiles away. The events and the record layout, which the host reads back, are
// in bwd_config.h.
#pragma once
#include "../common/params.h"
#include "../../ptx/common.cuh"
#include "bwd_config.h"

namespace gdpa::sm90 {

template <bool ON>
struct BwdTracer {
  __device__ BwdTracer(const GdpaParams&, int, bool) {}
  __device__ void operator()(unsigned, int) {}
};

template <>
struct BwdTracer<true> {
  // One register in the traced roles, whose consumers have none to spare: (record index) and the
  // role, packed; -1 for threads that do not record. The buffer's address is read from the
  // kernel's parameters at each record.
  const GdpaParams& p;
  int state;
  // `role`: 0 / 1 consumer warpgroup, 2 producer; `recorder`: the one thread that writes.
  __device__ BwdTracer(const GdpaParams& params, int role, bool recorder) : p(params) {
    state = recorder && int(blockIdx.x) < kBwdTraceCtas && params.trace != nullptr ? role << 16 : -1;
  }
  __device__ void operator()(unsigned event, int step) {
    const int n = state & 0xFFFF;
    if (state >= 0 && n < kBwdTraceSlots) {
      const int role = state >> 16;
      BwdTraceRecord* out =
          static_cast<BwdTraceRecord*>(p.trace) + (blockIdx.x * kBwdTraceRoles + role) * kBwdTraceSlots;
      const unsigned long long c = clock64();
      const unsigned ns = unsigned(ptx::global_timer_ns());
      out[n] = BwdTraceRecord{unsigned(c), unsigned(c >> 32), event | unsigned(step) << 8, ns};
      ++state;
    }
  }
};

}  // namespace gdpa::sm90
