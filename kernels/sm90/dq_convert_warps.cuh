// dq_convert_warps.cuh — kBwdDqConvertWarps (bwd_config.h): the dQ conversion inside gdpa_bwd, by
// warps 2 and 3 of the producer warpgroup, which have no other role. Each warp walks the host's
// block list (host/sm90_bwd_dq_plan.h, the follower's: every (query tile, head) block once, in the
// order its last add lands) on its own, taking the next block from one counter: it waits until the
// block's semaphore shows every add, then reads the fp32 block from L2 and writes it as dQ rows
// times logit_scale * out_scale, rounded to the io dtype: dq_convert's arithmetic, the same bits.
//
// Why these warps, and why so: the follower kernel (dq_follow.cu) needs SMs of its own, because a
// backward CTA leaves no room beside it (225 of 227 KB of shared memory; 240 + 240 + 24 registers
// per thread of each processing block's three warps). The producer warpgroup's idle warps are there
// already, but with 24 registers and no shared memory: no TMA ring, no staging, at most a few
// 16-byte loads in flight per lane. That is slow per warp (about 1 KB per L2 round trip), but a
// block is needed only every several steps of the SM's own tiles, and nothing in the backward ever
// waits for these warps: the twenty-seventh session's converters in the same warps were fed by the
// dQ writer through a ring, and when they fell behind, the writer and then the consumers waited
// (0.2-0.3x). Here a late warp only delays its own next block.
//
// Layout: a 64 x 64 chunk of the accumulator is float4 [k][tid] of the consumer warpgroup's
// fragment (bwd_config.h dq_frag_*), so a warp's 16-byte loads at f = 32 j + lane read 512
// contiguous bytes, and float4 f holds two packed pairs of output: row r, columns c, c + 1 and row
// r + 8, the same columns. They go out as two 4-byte stores (no staging tile to make 16-byte row
// stores: there is no shared memory left for one).
#pragma once
#include "../common/params.h"
#include "../../ptx/common.cuh"
#include "../../ptx/fence.cuh"
#include "bwd_config.h"
#include "fragments.cuh"

namespace gdpa::sm90 {

// Loads in flight per lane: 4 registers each, within the producer warpgroup's 24.
constexpr int kConvertWarpLoads = 2;

template <int DTYPE, int D>
__device__ __forceinline__ void bwd_dq_convert_warps(const GdpaParams& p) {
  constexpr int kChunks = D / kBwdDqCols;
  constexpr int kPerLane = kBwdDqJobFloats / 4 / 32;  // float4 per lane per chunk
  static_assert(kPerLane % kConvertWarpLoads == 0, "whole groups of loads");
  const int lane = ptx::lane_id();
  const auto* items = static_cast<const DqConvertItem*>(p.dq_follow_items);
  const float scale = p.logit_scale * p.out_scale;
#pragma unroll 1
  while (true) {
    int i = 0;
    if (lane == 0) i = atomicAdd(p.dq_follow_next, 1);
    i = __shfl_sync(0xffffffffu, i, 0);
    if (i >= p.dq_follow_count) break;
    const DqConvertItem it = items[i];
    if (it.count > 0) {
      if (lane == 0) {
        // A wait longer than ~2^35 cycles (~17 s) would be a bug (a count the adds never reach):
        // trap, so that the launch fails instead of hanging the GPU.
        const long long start = clock64();
        while (ptx::ld_relaxed_gpu(p.semaphores + it.block) != it.count) {
          __nanosleep(256);
          if (clock64() - start > (1ll << 35)) __trap();
        }
      }
      __syncwarp();
      // Every lane's own acquire: its loads below are ordered after the writers' releases.
      (void)ptx::ld_acquire_gpu(p.semaphores + it.block);
    }
    const int head = it.head_rows >> 7, rows = it.head_rows & 127;
    const int row_stride = p.heads_q * D;  // elements; 64 rows of it stay far below 2^31
    const bool added = it.count > 0;  // otherwise nobody adds to the block: its rows are zeros
#pragma unroll 1
    for (int c = 0; c < kChunks; ++c) {
      const float4* chunk = reinterpret_cast<const float4*>(p.dq_accum + dq_chunk_offset(it.block, c, D)) + lane;
      unsigned short* out =
          static_cast<unsigned short*>(p.dq) + (long long)it.row0 * row_stride + head * D + c * kBwdDqCols;
#pragma unroll 1
      for (int j0 = 0; j0 < kPerLane; j0 += kConvertWarpLoads) {
        float4 v[kConvertWarpLoads];
#pragma unroll
        for (int u = 0; u < kConvertWarpLoads; ++u)
          v[u] = added ? ptx::ld_global_cg_f4(chunk + (j0 + u) * 32) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int u = 0; u < kConvertWarpLoads; ++u) {
          // float4 f = 32 j + lane is float4 j / 4 (registers 4 (j / 4) ..) of consumer thread f % 128
          const int j = j0 + u, tid = (j & 3) * 32 + lane;
          const int row = dq_frag_row(tid, 4 * (j >> 2)), col = dq_frag_col(tid, 4 * (j >> 2));
          if (row < rows) ptx::st_global_u32(out + row * row_stride + col, pack2<DTYPE>(v[u].x * scale, v[u].y * scale));
          if (row + 8 < rows)
            ptx::st_global_u32(out + (row + 8) * row_stride + col, pack2<DTYPE>(v[u].z * scale, v[u].w * scale));
        }
      }
    }
  }
}

}  // namespace gdpa::sm90
