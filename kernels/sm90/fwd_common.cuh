// fwd_common.cuh — what the forward's roles share: named barriers, the mbarrier set, the TMA
// byte counts, and each tile's record taken over the lanes.
// Part of the Hopper forward: gdpa_fwd.cu has the design, the roles and the kernel.
#pragma once
#include "../common/bool_constant.h"
#include "../common/params.h"
#include "../../ptx/common.cuh"
#include "../../ptx/fence.cuh"
#include "../../ptx/mbarrier.cuh"
#include "../../ptx/regs.cuh"
#include "../../ptx/smem_desc.h"
#include "../../ptx/tma.cuh"
#include "../../ptx/wgmma.cuh"
#include "epilogue.cuh"
#include "fragments.cuh"
#include "fwd_config.h"
#include "fwd_qk.cuh"
#include "fwd_sibling_tail.cuh"
#include "fwd_tile.cuh"
#include "jagged_load.cuh"
#include "pipeline.cuh"
#include "record_lanes.cuh"
#include "trace.cuh"

namespace gdpa::sm90 {

// Named barrier ids (0 is __syncthreads): one per consumer warpgroup for the pingpong turn, one
// per consumer warpgroup for its O staging buffer.
constexpr int kBarSchedBase = 1;
constexpr int kBarEpilogueBase = kBarSchedBase + kFwdConsumerWarpgroups;
constexpr int kBarSiblingTail = kBarEpilogueBase + kFwdConsumerWarpgroups;  // kFwdSiblingTails

// The full / empty mbarrier pair of every Q stage and every K and V stage: the producer arms full
// with the TMA bytes, the consumers' warps (and kFwdSiblingTails' tail warps, for K and V) arrive
// on empty when they are done with the stage.
template <int FLAGS>
struct FwdBarriers {
  SlotBarriers q[fwd_q_stages(FLAGS)];
  SlotBarriers k[fwd_kv_stages(FLAGS)];
  SlotBarriers v[fwd_kv_stages(FLAGS)];
};

// TMA bytes of `boxes` 64-row boxes of a D-column tile.
template <int D>
__device__ __forceinline__ unsigned load_bytes(int boxes) {
  return unsigned(boxes * kFwdLoadRows * D * 2);
}

// kFwdRecordLanes: the consumers take each tile's record a tile ahead, spread over the lanes:
// lane l of every warp loads field l % 8 (one register, the same 32 bytes for every warp), and
// fwd_tile_from_lanes gathers them with shuffles when that tile starts. Why: ptxas keeps the
// record's fields in uniform registers and moves a loaded record there (R2UR) right after its
// load, so a record loaded where it is needed costs the whole load (225-396 cycles in the trace,
// an L2 hit: a prefetch into L1 a tile earlier did not keep the line there); eight registers held
// through a tile instead cost more than the load (experiments/PERF_NOTES.md).
__device__ __forceinline__ int fwd_tile_field(const GdpaParams& p, int index) {
  return record_field_of_lane<kFwdRecordFields>(p.tile_records, index);
}

__device__ __forceinline__ FwdTile fwd_tile_from_lanes(int field) {
  auto lane = [&](int l) { return __shfl_sync(0xffffffffu, field, l); };
  return FwdTile{{lane(0), lane(1), lane(2), lane(3), lane(4), lane(5), lane(6), lane(7)}};
}

}  // namespace gdpa::sm90
