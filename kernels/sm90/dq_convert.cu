// dq_convert.cu — the last kernel of the Hopper backward: the fp32 dQ accumulator (the blocked
// layout of bwd_config.h, filled by gdpa_bwd's bulk reduces) times logit_scale * out_scale (folded
// out of dS, see gdpa_bwd.cu), rounded to the io dtype and written as the rows of the packed
// [total_q, Hq, D] dQ.
//
// Launch (host/sm90_bwd.cpp): grid = (dq_num_slots(total_q, batch), Hq), block = 128 threads, no
// dynamic shared memory. One CTA converts one (query tile slot, head): D / 64 blocks of 64 x 64.
// Every row of every sequence belongs to exactly one slot, so every dQ element is written, also
// those of query tiles no key sees (Lk = 0, masks): non-deterministic mode, their accumulator
// stayed at the memset's zeros; deterministic mode, nothing is zeroed (the first contributor
// stores) and their semaphore, which counts contributions, is 0, so zeros are written without
// reading the accumulator. Padding slots (at most one per sequence) write nothing.
// FINISHED (kBwdDqFinish): the backward kernel already wrote every block with a contributor (its
// last contributor finished it), so only the blocks whose semaphore is 0 are left: zeros.
// With kBwdDqFollow this pass does not run: dq_follow.cu converts every block beside the kernel.
#include "../common/params.h"
#include "bwd_config.h"
#include "dq_rows.cuh"

namespace gdpa::sm90 {

template <int DTYPE, int D, bool FINISHED>
__global__ void __launch_bounds__(kConvertThreads) gdpa_bwd_dq_convert(const __grid_constant__ GdpaParams p) {
  static_assert(D % kBwdDqCols == 0, "head dim");
  __shared__ __align__(16) unsigned char tile[kConvertTileBytes];
  const int slot = blockIdx.x, head = blockIdx.y, tid = threadIdx.x;
  const bool untouched = p.deterministic && p.semaphores[dq_block_index(slot, head, p.heads_q)] == 0;
  if (FINISHED && !untouched) return;  // decided before the search below: most CTAs end here

  // The sequence owning the slot: the last b whose first slot is <= slot (slot starts are
  // non-decreasing in b; sequences with Lq = 0 own no slot and are skipped by "last").
  int lo = 0, hi = p.batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (dq_slot_begin(p.cu_seqlens_q[mid], mid) <= slot)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int b = lo;
  const int q_begin = p.cu_seqlens_q[b];
  const int len_q = p.cu_seqlens_q[b + 1] - q_begin;
  const int m0 = (slot - dq_slot_begin(q_begin, b)) * kBwdBlockM;  // first sequence-local row
  if (m0 >= len_q) return;                                         // a padding slot: no rows
  const int rows = min(kBwdBlockM, len_q - m0);

  const float scale = p.logit_scale * p.out_scale;
  const long long row_stride = (long long)p.heads_q * D;  // elements
  unsigned short* out = static_cast<unsigned short*>(p.dq) + (long long)(q_begin + m0) * row_stride + head * D;
  const float* acc = p.dq_accum + dq_block_offset(slot, head, p.heads_q, 0, D);

#pragma unroll 1
  for (int c = 0; c < D / kBwdDqCols; ++c) {
    // Coalesced float4 reads: thread tid reads exactly what consumer thread tid staged, so it knows
    // each value's (row, column) from the accumulator layout.
    const float4* src = reinterpret_cast<const float4*>(acc + c * kBwdDqJobFloats);
    float4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = untouched ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : src[k * kConvertThreads + tid];
    stage_dq_fragment<DTYPE>(v, scale, tile, tid);
    __syncthreads();
    store_staged_dq_rows(tile, out + c * kBwdDqCols, row_stride, rows, tid);
    __syncthreads();  // the tile is rewritten by the next chunk
  }
}

}  // namespace gdpa::sm90
