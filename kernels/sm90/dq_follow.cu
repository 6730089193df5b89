// dq_follow.cu — the dQ conversion beside the Hopper backward (kBwdDqFollow, bwd_config.h): the
// fp32 accumulator blocks, each read once its last add has landed, times logit_scale * out_scale,
// rounded to the io dtype and written as dQ rows, while gdpa_bwd still runs on the other SMs.
//
// Launch (host/sm90_bwd.cpp): right behind gdpa_bwd with programmatic stream serialization; every
// gdpa_bwd CTA allows it at its start (griddepcontrol.launch_dependents), so these CTAs are placed
// only once all of the backward's persistent CTAs hold their SMs: on the SMs the host left out of
// its grid. The CTAs take the items of the host's list (host/sm90_bwd_dq_plan.h: every (query
// tile, head) block, sorted by when its last add lands) from one counter, so the walk keeps pace
// with the backward and reads blocks from L2; the grid fills every SM, so the CTAs that find no
// room until the backward's CTAs exit share the last blocks, which complete fastest at the end of
// a batch of short sequences (its last tiles are the shortest). Nothing in the backward waits for
// this kernel.
//
// Roles: warp 0 loads, warps 1..4 (128 threads, the consumer warpgroup's fragment layout) convert.
// Loads go by the TMA unit (a 16 KB bulk copy per 64 x 64 chunk into a ring of kFollowStages
// slots), so they hold no registers. An SM converts about 90 GB/s (read and written) this way, the
// same as a first form that loaded eight float4 per thread: the host sizes the SMs it leaves to
// this kernel by that rate (sm90_bwd_follow_sms).
// A block is loaded only after its semaphore, read with acquire semantics, shows every add; the
// writer released it after its bulk adds completed, behind a proxy fence, and the proxy fence here
// orders our acquire before the bulk copy (the async proxy), as in the ordered finish's writer.
#include "../common/params.h"
#include "../../ptx/common.cuh"
#include "../../ptx/fence.cuh"
#include "../../ptx/mbarrier.cuh"
#include "../../ptx/regs.cuh"
#include "../../ptx/tma.cuh"
#include "bwd_config.h"
#include "dq_rows.cuh"
#include "dq_semaphore.cuh"

namespace gdpa::sm90 {

static_assert(kConvertTileBytes % 8 == 0, "barriers after the tile stay 8-byte aligned");

template <int DTYPE, int D>
__global__ void __launch_bounds__(kFollowThreads) gdpa_bwd_dq_follow(const __grid_constant__ GdpaParams p) {
  static_assert(D % kBwdDqCols == 0, "head dim");
  constexpr int kChunks = D / kBwdDqCols;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* tile = smem + kFollowRingBytes;
  auto* full = reinterpret_cast<unsigned long long*>(tile + kConvertTileBytes);
  unsigned long long* empty = full + kFollowStages;
  // Which chunk each slot holds: item * kChunks + chunk, or -1 once the list is used up. Written
  // by the loader before its arrival on the slot's full barrier, read after the wait on it.
  int* slot_chunk = reinterpret_cast<int*>(empty + kFollowStages);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kFollowStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);                      // the loader's arrival (+ the copy's bytes)
      ptx::mbarrier_init(&empty[s], kConvertThreads / 32);  // one arrival per converting warp
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  const auto* items = static_cast<const DqConvertItem*>(p.dq_follow_items);

  if (threadIdx.x < 32) {  // the loader: one lane
    if (threadIdx.x == 0) {
      unsigned q = 0;  // chunks produced
      auto next_slot = [&] {
        const int s = int(q % kFollowStages);
        ptx::mbarrier_wait(&empty[s], ((q / kFollowStages) & 1u) ^ 1u);  // a fresh barrier passes
        ++q;
        return s;
      };
#pragma unroll 1
      while (true) {
        // Items are taken from one counter, in list order, by whichever CTA is free: the CTAs on
        // the SMs the backward leaves out take them as their blocks complete, and those placed
        // when the backward's CTAs exit share the last ones.
        const int i = atomicAdd(p.dq_follow_next, 1);
        if (i >= p.dq_follow_count) {
          const int s = next_slot();
          slot_chunk[s] = -1;
          ptx::mbarrier_arrive(&full[s]);
          break;
        }
        const DqConvertItem it = items[i];
        if (it.count > 0) semaphore_wait<128>(p.semaphores + it.block, it.count);  // every add landed
#pragma unroll 1
        for (int c = 0; c < kChunks; ++c) {
          const int s = next_slot();
          slot_chunk[s] = i * kChunks + c;
          if (it.count > 0) {
            ptx::mbarrier_arrive_expect_tx(&full[s], kBwdDqJobBytes);
            ptx::bulk_copy_g2s(smem + s * kBwdDqJobBytes, p.dq_accum + dq_chunk_offset(it.block, c, D),
                               kBwdDqJobBytes, &full[s], ptx::kEvictFirst);
          } else {
            ptx::mbarrier_arrive(&full[s]);  // nobody adds to this block: its rows are zeros
          }
        }
      }
    }
    return;
  }

  const int tid = threadIdx.x - 32;
  const long long row_stride = (long long)p.heads_q * D;  // elements
  const float scale = p.logit_scale * p.out_scale;
#pragma unroll 1
  for (unsigned q = 0;; ++q) {  // chunks consumed
    const int s = int(q % kFollowStages);
    ptx::mbarrier_wait(&full[s], (q / kFollowStages) & 1u);
    // Read by lane 0 alone and passed on by a shuffle: the slot's next header is written once the
    // warps' lane 0 have arrived on `empty`, and racecheck orders a read before that write only in
    // the arriving thread itself (a read by another lane, ordered by __syncwarp, it reports).
    int chunk_id = 0;
    if (ptx::lane_id() == 0) chunk_id = slot_chunk[s];
    chunk_id = __shfl_sync(0xffffffffu, chunk_id, 0);
    if (chunk_id < 0) break;
    const int c = chunk_id % kChunks;
    const DqConvertItem it = items[chunk_id / kChunks];
    // Thread tid's float4 k of the chunk: what consumer thread tid staged (bwd_config.h layout),
    // 16 consecutive bytes per thread, so a warp's read is conflict-free.
    const float4* chunk = reinterpret_cast<const float4*>(smem + s * kBwdDqJobBytes);
    float4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = it.count > 0 ? chunk[k * kConvertThreads + tid] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __syncwarp();
    if (ptx::lane_id() == 0) ptx::mbarrier_arrive(&empty[s]);  // the slot may be refilled
    const int head = dq_item_head(it.head_rows), rows = dq_item_rows(it.head_rows);
    unsigned short* out =
        static_cast<unsigned short*>(p.dq) + (long long)it.row0 * row_stride + head * D + c * kBwdDqCols;
    stage_dq_fragment<DTYPE>(v, scale, tile, tid);
    ptx::named_barrier_sync(1, kConvertThreads);
    store_staged_dq_rows(tile, out, row_stride, rows, tid);
    ptx::named_barrier_sync(1, kConvertThreads);  // the tile is rewritten by the next chunk
  }
}

}  // namespace gdpa::sm90
