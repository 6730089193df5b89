// fwd_tail.cu — the forward's query-column tiles: each sequence's last query rows computed with
// the queries as the wgmma's N dimension, in blocks of at most 64 rows, behind the main forward
// (host/sm90.cpp launches it; host/scheduler.h build_tail_schedule says which rows).
//
//   S^T = K_j Q^T     (64 keys x N queries: A = the K slot, K-major; B = the Q stage, K-major)
//   P^T = act(S^T)    (in registers, then stored transposed to shared memory as [query][key])
//   O^T += V_j^T P^T  (head dim x N: A = the V slot read M-major; B = P^T, K-major)
//
// Why: a wgmma's M is 64, so the main forward spends a whole consumer warpgroup's 64 rows, and the
// tile's whole boundary, on a last tile of r rows; N comes in steps of 8, so here a tile of r <= 32
// queries costs a 32-column product and one of 33..64 a 64-column one (fwd_tail_config.h).
//
// Roles: warpgroup 0 gives its registers away; lane 0 of its warps 0 and 1 are the producers of
// consumer 0 and 1, each loading its consumer's Q, K and V on its own barriers (a producer
// blocked on one consumer's slot does not hold up the other). Warpgroups 1 and 2 are independent
// consumers with their own tiles, slots and P stages: no turns, no shared K / V. Each runs its steps
// in series (activation, then S^T of the next block and O^T of this one issued back to back); the
// other consumer's wgmmas fill the tensor cores while it activates, and its tile boundary (O
// staged and copied out, the next tile's first S^T) lies under the other's steps.
//
// A tile's rows past its sequence's end are zero rows of Q (jagged_load.cuh), so their S^T columns
// and P^T rows are zero and their O rows are never copied out; keys past the end are zero rows of
// K and V, so their scores are 0 and act(0) = 0 (no mask: the host sends only unmasked problems).
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
#include "fwd_tail_config.h"
#include "fwd_tile.cuh"
#include "jagged_load.cuh"
#include "pipeline.cuh"
#include "query_columns.cuh"

namespace gdpa::sm90 {

struct TailBarriers {
  SlotBarriers q[kTailQStages];
  SlotBarriers k[kTailKvStages];
  SlotBarriers v[kTailKvStages];
};

// Named barrier of consumer c (0 is __syncthreads): its P stores before its O^T reads them, and
// its staged O before the threads' copy.
GDPA_DEVICE int tail_bar(int c) { return 1 + c; }

// The tiles of consumer c of this CTA: the host deals them per (CTA, consumer).
GDPA_DEVICE void tail_tiles(const GdpaParams& p, int c, int* begin, int* end) {
  const int slot = kTailConsumers * int(blockIdx.x) + c;
  *begin = p.cta_tile_begin[slot];
  *end = p.cta_tile_begin[slot + 1];
}

// One consumer's stages: the producer fills them through the pointers (TMA destinations), the
// consumer reads them through the shared-window addresses (wgmma descriptors, stmatrix).
template <int D>
struct TailRegion {
  unsigned char* base;  // this consumer's region of shared memory
  TailBarriers* bars;
  static constexpr TailSmemPlan plan = tail_smem_plan(D);
  GDPA_DEVICE unsigned char* q_at(int count) const { return base + plan.q_off + (count % kTailQStages) * plan.q_bytes; }
  GDPA_DEVICE unsigned char* k_at(int count) const { return base + plan.k_off + (count % kTailKvStages) * plan.kv_bytes; }
  GDPA_DEVICE unsigned char* v_at(int count) const { return base + plan.v_off + (count % kTailKvStages) * plan.kv_bytes; }
  GDPA_DEVICE unsigned q(int count) const { return ptx::smem_addr(q_at(count)); }
  GDPA_DEVICE unsigned k(int count) const { return ptx::smem_addr(k_at(count)); }
  GDPA_DEVICE unsigned v(int count) const { return ptx::smem_addr(v_at(count)); }
  GDPA_DEVICE unsigned p(int step) const { return ptx::smem_addr(base + plan.p_off + (step & 1) * plan.p_bytes); }
};

GDPA_DEVICE unsigned stage_phase(int count, int stages) { return unsigned(count / stages) & 1u; }

// ---------------------------------------------------------------------------------------------
// Producer of consumer c: one thread. Q in one 64-row box (rows past the end arrive as zeros),
// then each 64-key block of K and V in one box each.
// ---------------------------------------------------------------------------------------------
template <int D>
__device__ __forceinline__ void tail_producer(int c, const GdpaParams& p, const ptx::TensorMap* tm_q,
                                              const ptx::TensorMap* tm_k, const ptx::TensorMap* tm_v,
                                              const TailRegion<D>& r) {
  constexpr unsigned kBoxBytes = unsigned(kFwdLoadRows * D * 2);
  static_assert(kTailMaxRows == kFwdLoadRows && kTailBlockN == kFwdLoadRows, "one box per tile and per block");
  int q_count = 0, kv_count = 0;
  int it, end;
  tail_tiles(p, c, &it, &end);
  for (; it < end; ++it) {
    const FwdTile t = fwd_tile(p, it);
    const int qs = q_count % kTailQStages;
    producer_acquire(r.bars->q[qs], stage_phase(q_count, kTailQStages), kBoxBytes);
    load_jagged_rows<D, kTailMaxRows, kFwdLoadRows>(r.q_at(q_count), 1, tm_q,
                                                     &r.bars->q[qs].full, t.head(), t.q_row,
                                                     t.q_row - t.m0 + t.len_q, p.load_window_q, p.zero_rows,
                                                     ptx::kEvictFirst);
    ++q_count;
    const int key_end = t.k_row + t.len_k;
    for (int n = t.n_begin(); n < t.n_end(); ++n, ++kv_count) {
      const int s = kv_count % kTailKvStages;
      const unsigned phase = stage_phase(kv_count, kTailKvStages);
      const int key_row = t.k_row + n * kTailBlockN;
      producer_acquire(r.bars->k[s], phase, kBoxBytes);
      load_jagged_rows<D, kTailBlockN, kFwdLoadRows>(r.k_at(kv_count), 1, tm_k,
                                                      &r.bars->k[s].full, t.kv_head(), key_row, key_end,
                                                      p.load_window_k, p.zero_rows, ptx::kEvictLast);
      producer_acquire(r.bars->v[s], phase, kBoxBytes);
      load_jagged_rows<D, kTailBlockN, kFwdLoadRows>(r.v_at(kv_count), 1, tm_v,
                                                      &r.bars->v[s].full, t.kv_head(), key_row, key_end,
                                                      p.load_window_k, p.zero_rows, ptx::kEvictLast);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Consumer helpers: one warpgroup, one tile of N query columns.
// ---------------------------------------------------------------------------------------------

// S^T = K Q^T over the head dim: the main forward's score product (fwd_qk.cuh) with the operands'
// roles swapped, the K slot's 64 keys as M and the Q stage's first N rows as N (both [rows][128 B]
// panels of 64 rows, K-major).
template <int DTYPE, int D, int N>
__device__ __forceinline__ void issue_st(float (&s)[N / 2], unsigned k_slot, unsigned q_stage) {
  issue_qk<DTYPE, D, N, kTailBlockN, kTailMaxRows>(s, k_slot, 0, q_stage);
}

// One tile of N query columns, start to end: its first S^T, then per key block P^T stored, the
// next block's S^T and this block's O^T issued, and at the end O staged in the tile's Q stage and
// copied to its rows by the threads (at most 64 of them from the tile's first row m0; mostly a
// sequence's last rows, which a TMA store could not clip).
template <int DTYPE, int D, int ACT, int FLAGS, int N>
__device__ __forceinline__ void tail_tile(int c, const FwdTile& t, const GdpaParams& p, const TailRegion<D>& r,
                                          const FragThread& f, int tid, int& q_count, int& kv_count) {
  constexpr bool kUnit = (FLAGS & kFwdUnitLogitScale) != 0;
  // kFwdHalfFold: P = round(2 f), O halved when it is staged (as in the main forward).
  constexpr bool kTwice = (FLAGS & kFwdHalfFold) != 0 && use_twice_f<DTYPE, ACT, 0>;
  float s_acc[N / 2];
  unsigned p_pairs[N / 4];
  float o_acc[D / 64][N / 2];
  const MaskBounds mb{t.len_q, t.len_k, -1, -1};
  const unsigned q_stage = r.q(q_count);
  const int qs = q_count % kTailQStages;
  const int nb = t.n_end() - t.n_begin();
  const int kv0 = kv_count;

  consumer_wait(r.bars->q[qs], stage_phase(q_count, kTailQStages));
  consumer_wait(r.bars->k[kv0 % kTailKvStages], stage_phase(kv0, kTailKvStages));
  ptx::wgmma_fence();
  issue_st<DTYPE, D, N>(s_acc, r.k(kv0), q_stage);
  ptx::wgmma_commit();
#pragma unroll
  for (int h = 0; h < D / 64; ++h)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) o_acc[h][i] = 0.0f;
  ptx::wgmma_wait<0>();
  ptx::fence_operand(s_acc);
  consumer_release(r.bars->k[kv0 % kTailKvStages]);

  // P^T of block j into its P stage, visible to the warpgroup's next wgmma.
  auto store_p = [&](int j) {
    s_to_p<DTYPE, ACT, kMaskNone, false, kUnit, N, 0, kTwice>(s_acc, p_pairs, p.logit_scale, f, 0, 0, mb);
    store_pairs_trans<N>(r.p(j), 0, f, [&](int i) { return p_pairs[i]; });
    ptx::fence_proxy_async_smem();  // generic stores -> the tensor cores' reads (async proxy)
    ptx::named_barrier_sync(tail_bar(c), 128);
  };
  // Steps with a next block: S^T of block j + 1 is issued first, so that the wait below returns
  // with it while O^T of block j still runs under the next activation.
  for (int j = 0; j < nb - 1; ++j) {
    const int kj = kv0 + j;
    store_p(j);
    consumer_wait(r.bars->k[(kj + 1) % kTailKvStages], stage_phase(kj + 1, kTailKvStages));
    consumer_wait(r.bars->v[kj % kTailKvStages], stage_phase(kj, kTailKvStages));
    ptx::wgmma_fence();
    issue_st<DTYPE, D, N>(s_acc, r.k(kj + 1), q_stage);
    ptx::wgmma_commit();
    issue_ot<DTYPE, D, N, kTailBlockN, kTailMaxRows>(o_acc, r.v(kj), r.p(j));
    ptx::wgmma_commit();
    ptx::wgmma_wait<1>();  // S^T of block j + 1 and O^T of block j - 1 are complete
    ptx::fence_operand(s_acc);
    consumer_release(r.bars->k[(kj + 1) % kTailKvStages]);
    if (j > 0) consumer_release(r.bars->v[(kj - 1) % kTailKvStages]);
  }
  {
    const int kj = kv0 + nb - 1;
    store_p(nb - 1);
    consumer_wait(r.bars->v[kj % kTailKvStages], stage_phase(kj, kTailKvStages));
    ptx::wgmma_fence();
    issue_ot<DTYPE, D, N, kTailBlockN, kTailMaxRows>(o_acc, r.v(kj), r.p(nb - 1));
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
#pragma unroll
    for (int h = 0; h < D / 64; ++h) ptx::fence_operand(o_acc[h]);
    if (nb > 1) consumer_release(r.bars->v[(kj - 1) % kTailKvStages]);
    consumer_release(r.bars->v[kj % kTailKvStages]);
  }

  // O staged as [query][D] in the Q stage (its last reader, the last S^T, is complete), then the
  // tile's rows copied out; the stage goes back to the producer once the copy has read it.
  const float scale = (kTwice ? 0.5f : 1.0f) * p.out_scale;
#pragma unroll
  for (int h = 0; h < D / 64; ++h)
    store_pairs_trans<N>(q_stage, 64 * h, f, [&](int i) { return pack2<DTYPE>(o_acc[h][2 * i] * scale, o_acc[h][2 * i + 1] * scale); });
  ptx::named_barrier_sync(tail_bar(c), 128);
  const int row_stride = p.heads_q * D;
  unsigned short* const out_rows = static_cast<unsigned short*>(p.out) + (long long)t.q_row * row_stride + t.head() * D;
  copy_staged_rows<D, kTailMaxRows>(q_stage, out_rows, row_stride, t.len_q - t.m0, tid);
  ptx::fence_proxy_async_smem();  // the copy's generic reads before the next TMA load into the stage
  __syncwarp();
  consumer_release(r.bars->q[qs]);
  ++q_count;
  kv_count += nb;
}

template <int DTYPE, int D, int ACT, int FLAGS>
__device__ __forceinline__ void tail_consumer(int c, const GdpaParams& p, const TailRegion<D>& r) {
  const int tid = int(threadIdx.x) - 128 * (c + 1);
  const FragThread f = frag_thread(tid);
  int q_count = 0, kv_count = 0;
  int it, end;
  tail_tiles(p, c, &it, &end);
  for (; it < end; ++it) {
    const FwdTile t = fwd_tile(p, it);
    if (tail_cols(t.len_q - t.m0) == kTailNarrowRows)
      tail_tile<DTYPE, D, ACT, FLAGS, kTailNarrowRows>(c, t, p, r, f, tid, q_count, kv_count);
    else
      tail_tile<DTYPE, D, ACT, FLAGS, kTailMaxRows>(c, t, p, r, f, tid, q_count, kv_count);
  }
}

// Registers per thread after reallocation, as in the main forward: 24 x 128 + 240 x 256 <= 65,536.
constexpr int kTailProducerRegs = 24;
constexpr int kTailConsumerRegs = 240;

// FLAGS: the main forward's flags (kFwdUnitLogitScale and kFwdHalfFold are read). The host sends
// only tiles with keys (n_range not empty) and at most 64 rows, of unmasked problems.
template <int DTYPE, int D, int ACT, int FLAGS>
__global__ void __launch_bounds__(kTailThreads, 1)
    gdpa_fwd_tail(const __grid_constant__ ptx::TensorMap tm_q, const __grid_constant__ ptx::TensorMap tm_k,
                  const __grid_constant__ ptx::TensorMap tm_v, const __grid_constant__ GdpaParams p) {
  static_assert(D == 128, "the query-column tiles are built for D = 128 (two 64-wide halves of O^T)");
  constexpr TailSmemPlan plan = tail_smem_plan(D);
  static_assert(plan.consumer_bytes % 1024 == 0 && plan.q_bytes % 1024 == 0 && plan.kv_bytes % 1024 == 0 &&
                    plan.p_bytes % 1024 == 0,
                "128B-swizzled tiles must start on 1024-byte boundaries");
  extern __shared__ unsigned char smem_raw[];
  const unsigned raw = ptx::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + ((1024u - (raw & 1023u)) & 1023u);
  auto* bars = reinterpret_cast<TailBarriers*>(smem + plan.bar_off);
  if (threadIdx.x == 0) {
    for (int c = 0; c < kTailConsumers; ++c) {
      for (int s = 0; s < kTailQStages; ++s) {
        ptx::mbarrier_init(&bars[c].q[s].full, 1);
        ptx::mbarrier_init(&bars[c].q[s].empty, 4);  // the consumer's four warps
      }
      for (int s = 0; s < kTailKvStages; ++s) {
        ptx::mbarrier_init(&bars[c].k[s].full, 1);
        ptx::mbarrier_init(&bars[c].k[s].empty, 4);
        ptx::mbarrier_init(&bars[c].v[s].full, 1);
        ptx::mbarrier_init(&bars[c].v[s].empty, 4);
      }
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();

  const int wg = ptx::warpgroup_id();
  if (wg == 0) {
    ptx::setmaxnreg_dec<kTailProducerRegs>();
    const int c = ptx::warp_id();
    if (c < kTailConsumers && ptx::elect_one()) {
      ptx::prefetch_tensormap(&tm_q);
      ptx::prefetch_tensormap(&tm_k);
      ptx::prefetch_tensormap(&tm_v);
      tail_producer<D>(c, p, &tm_q, &tm_k, &tm_v, TailRegion<D>{smem + c * plan.consumer_bytes, &bars[c]});
    }
  } else {
    ptx::setmaxnreg_inc<kTailConsumerRegs>();
    const int c = wg - 1;
    tail_consumer<DTYPE, D, ACT, FLAGS>(c, p, TailRegion<D>{smem + c * plan.consumer_bytes, &bars[c]});
  }
}

}  // namespace gdpa::sm90
