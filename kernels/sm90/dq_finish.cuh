// dq_finish.cuh — one warp turns a finished dQ block into io-dtype rows inside the backward kernel
// (kBwdDqFinish, gdpa_bwd.cu bwd_dq_finisher): the block's last contributor's own part (staged in
// fragment order by its consumer warpgroup) plus the earlier contributors' partial sum (brought
// into shared memory by the TMA unit), times logit_scale * out_scale, rounded, stored whole rows.
//
// It runs in warpgroup 0, which keeps 24 registers per thread after setmaxnreg so that the two
// consumer warpgroups can have 240: hence one round of 8 columns x 2 rows per lane at a time and
// only shared-memory reads (an earlier form read the partial sums from L2 with these few
// registers and could not keep enough loads in flight; see experiments/PERF_NOTES.md).
#pragma once
#include "../../ptx/common.cuh"
#include "bwd_config.h"
#include "fragments.cuh"

namespace gdpa::sm90 {

// The exchange with lane ^ MASK of bwd_config.h's dq_finish_exchange_slot, as selects (a run-time
// index into u[] would put it in local memory).
template <int MASK>
__device__ __forceinline__ void dq_finish_exchange(unsigned (&u)[4], int lane) {
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int lo = MASK == 1 ? 2 * e : e;
    const bool upper = (lane & MASK) != 0;
    const unsigned got = __shfl_xor_sync(0xffffffffu, upper ? u[lo] : u[lo + MASK], MASK);
    if (upper)
      u[lo] = got;
    else
      u[lo + MASK] = got;
  }
}

// staged: shared-window address of the job's staged 16 KB fp32 block (fragment order); the
// partial sum lies PARTIAL_DELTA bytes after it and is read only when has_partial. out: dQ
// element (row 0, column 0) of the block, rows `row_stride` elements apart; rows >= `rows` belong
// to the next sequence and are not written.
//
// The sum is partial + staged in fp32, the add the accumulator's bulk reduce would have done, and
// the scale and rounding are dq_convert's: the same bits as the path without kBwdDqFinish.
template <int DTYPE, int PARTIAL_DELTA>
__device__ __forceinline__ void finish_dq_block(unsigned staged, bool has_partial, unsigned short* out,
                                                int row_stride, int rows, float scale) {
  const int lane = ptx::lane_id();
  // The lane's parts of every position (bwd_config.h dq_finish_*) are folded in once; the rounds'
  // parts are immediates or warp-uniform.
  const unsigned lane_staged = staged + unsigned(lane) * 16;  // float4 [k][tid]: tid = round part + lane
  const int lane_row = dq_finish_lane_row(lane), lane_col = dq_finish_lane_col(lane);
#pragma unroll 1
  for (int round = 0; round < 16; ++round) {
    const unsigned round_bytes = unsigned((dq_finish_k(round) * 128 + dq_finish_tid(round, 0)) * 16);
    unsigned u[4];
    // Slot 2e + h: the two floats of row R + 8 h in float4 [k + e][tid] (bwd_config.h dq_frag_row),
    // read as 8-byte halves: 4 data registers live at a time instead of 8 (a warp's 8-byte loads
    // at a 16-byte stride take as many bank wavefronts as its 16-byte loads).
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned addr = lane_staged + round_bytes + (j >> 1) * 128 * 16 + (j & 1) * 8;
      float2 a = ptx::ld_shared_f32x2(addr);
      if (has_partial) {
        const float2 b = ptx::ld_shared_f32x2(addr + PARTIAL_DELTA);
        a.x = b.x + a.x;
        a.y = b.y + a.y;
      }
      u[j] = pack2<DTYPE>(a.x * scale, a.y * scale);
    }
    dq_finish_exchange<1>(u, lane);
    dq_finish_exchange<2>(u, lane);
    // 32-bit offsets (a block's 64 rows span 64 * Hq * D elements), computed per round: a 64-bit
    // per-lane base pointer would be two more registers than this warp has.
    const int row = dq_finish_round_row(round) + lane_row;
    if (row < rows)
      ptx::st_global_v4(out + (row * row_stride + dq_finish_round_col(round) + lane_col), u[0], u[1], u[2], u[3]);
  }
}

}  // namespace gdpa::sm90
