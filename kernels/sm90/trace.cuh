// trace.cuh — event timestamps of a kernel's roles, for the profiling variants (kFwdTrace,
// kBwdTrace).
//
// Where a step's time goes cannot be read off ncu's averages: short tiles spend it at the tile
// boundary, which a sampling profiler smears over the whole kernel, and the two consumer
// warpgroups' alternation is a matter of which one waits for which. With a trace flag one thread
// of each traced role of the first CTAS CTAs writes (SM cycle counter, event, step, global ns) at
// fixed points of its loop into GdpaParams::trace; experiments/trace_fwd.py and trace_bwd.py turn
// that into per-step phase times. Without the flag the tracer is an empty object and compiles
// away. Each kernel's events are listed in its config header (fwd_config.h, bwd_config.h); the
// record layout the host reads back is TraceRecord (kernels/common/params.h).
#pragma once
#include "../common/params.h"
#include "../../ptx/common.cuh"

namespace gdpa::sm90 {

template <bool ON, int CTAS, int ROLES, int SLOTS>
struct RoleTracer {
  __device__ RoleTracer(const GdpaParams&, int, bool) {}
  __device__ void operator()(unsigned, int) {}
};

template <int CTAS, int ROLES, int SLOTS>
struct RoleTracer<true, CTAS, ROLES, SLOTS> {
  // One register in the traced roles, whose consumers have none to spare: (record index) and the
  // role, packed; -1 for threads that do not record. The buffer's address is read from the
  // kernel's parameters at each record.
  const GdpaParams& p;
  int state;
  // `role`: 0..ROLES-1; `recorder`: the one thread of the role that writes.
  __device__ RoleTracer(const GdpaParams& params, int role, bool recorder) : p(params) {
    state = recorder && int(blockIdx.x) < CTAS && params.trace != nullptr ? role << 16 : -1;
  }
  __device__ void operator()(unsigned event, int step) {
    const int n = state & 0xFFFF;
    if (state >= 0 && n < SLOTS) {
      const int role = state >> 16;
      TraceRecord* out = static_cast<TraceRecord*>(p.trace) + (blockIdx.x * ROLES + role) * SLOTS;
      const unsigned long long c = clock64();
      const unsigned ns = unsigned(ptx::global_timer_ns());
      out[n] = TraceRecord{unsigned(c), unsigned(c >> 32), event | unsigned(step) << 8, ns};
      ++state;
    }
  }
};

}  // namespace gdpa::sm90
