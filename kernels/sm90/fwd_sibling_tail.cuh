// fwd_sibling_tail.cuh — the forward's fourth warpgroup under kFwdSiblingTails (fwd_config.h): a
// sequence's last query rows, after its whole query tiles, computed in the CTA of one of those
// whole tiles from the K and V blocks the producer loads for it anyway.
//
// Why: a wgmma's M is 64, so the two consumers spend a whole warpgroup's 64 rows, and a tile's
// whole boundary, on a last tile of r <= 64 rows: about 0.75 of a whole tile, where r / 128 of one
// is useful (PERF_NOTES, forty-second session). Here the queries are the wgmma's N, which comes in
// steps of 8, and the piece needs no K or V of its own: it reads each key block its host tile's
// consumers read, while they run their steps on it.
//
// Per key block j of the host tile (128 keys, two 64-key halves h):
//   S^T_h = K_j[64 h ..] Q^T   (m64n32: A the K slot's rows, B the piece's Q stage, both K-major)
//   P^T_h = act(S^T_h)         (in registers, stored transposed into the P^T stage, [query][key])
//   O^T  += V_j^T P^T          (for each 64-wide half of the head dim: A the V slot read M-major,
//                               B the P^T stage, K-major; 8 wgmmas of k16)
// and at the piece's end O is staged in its Q stage as [query][D] and copied to its rows by the
// threads. One S^T half at a time keeps the warpgroup inside its 88 registers (S^T 16, P^T 8, O^T
// 32; fwd_config.h). It runs its blocks in series, each product waited for: the consumers' wgmmas
// keep the tensor cores busy around it, and it must only keep up with their steps (about a quarter
// of their tensor work per block at 32 columns).
//
// Every K and V slot's empty barrier counts this warpgroup's four warps too, so it walks every
// tile's blocks, waiting for each slot and releasing it, also for tiles that carry no piece.
// Keys past a sequence's end are zero rows of K and V (jagged_load.cuh): their scores are 0 and
// act(0) = 0, so no mask (the host sends only unmasked problems). Query columns past the piece
// (the rest of its 64-row Q box: zero rows past the sequence's end, or rows of the sequence's
// other piece) are computed and never copied out.
#pragma once
#include "../common/params.h"
#include "../../ptx/common.cuh"
#include "../../ptx/fence.cuh"
#include "../../ptx/smem_desc.h"
#include "../../ptx/wgmma.cuh"
#include "epilogue.cuh"
#include "fragments.cuh"
#include "fwd_config.h"
#include "fwd_qk.cuh"
#include "fwd_tile.cuh"
#include "pipeline.cuh"
#include "query_columns.cuh"

namespace gdpa::sm90 {

// Registers of the tail warpgroup after reallocation: 24 + 2 x 200 + 88 = 512 per thread slot,
// 65,536 over the four warpgroups (the consumers' 200: gdpa_fwd.cu kConsumerRegsSibling).
constexpr int kSiblingTailRegs = 88;

// The tail warpgroup's whole run. k and v: the ring's slot barriers; piece_q: the piece Q stage's
// barriers (filled by the producer for each tile that carries a piece); bar: this warpgroup's
// named barrier.
template <int DTYPE, int D, int ACT, int FLAGS>
__device__ __forceinline__ void fwd_sibling_tail_warpgroup(const GdpaParams& p, unsigned char* smem, SlotBarriers* k,
                                                           SlotBarriers* v, SlotBarriers* piece_q, int bar) {
  constexpr int BN = fwd_block_n(D, FLAGS);
  constexpr int ST = fwd_kv_stages(FLAGS);
  constexpr int N = kFwdPieceRows;
  constexpr FwdSmemPlan plan = fwd_smem_plan(D, FLAGS);
  constexpr bool kUnit = (FLAGS & kFwdUnitLogitScale) != 0;
  // kFwdHalfFold: P = round(2 f), O halved when it is staged (as the consumers do).
  constexpr bool kTwice = (FLAGS & kFwdHalfFold) != 0 && use_twice_f<DTYPE, ACT, 0>;
  static_assert(D == 128 && BN == 128, "the pieces are built for D = 128 and 128-key blocks");
  const unsigned base = ptx::smem_addr(smem);
  const unsigned q_stage = base + plan.tail_q_off, p_stage = base + plan.tail_p_off;
  const unsigned k_slots = base + plan.k_off, v_slots = base + plan.v_off;
  const int tid = int(threadIdx.x) - 128 * (1 + kFwdConsumerWarpgroups);
  const FragThread f = frag_thread(tid);
  const int row_stride = p.heads_q * D;
  auto phase_of = [](int count, int stages) { return unsigned(count / stages) & 1u; };
  int kv_count = 0, pieces = 0;
  int it, end, stride;
  cta_tiles(p, &it, &end, &stride);
  for (; it < end; it += stride) {
    const FwdTile t = fwd_tile(p, it);
    if (t.empty()) continue;  // the producer loads nothing for it
    const int nblocks = t.n_end() - t.n_begin();
    const FwdPiece piece = fwd_piece(t);
    if (piece.rows == 0) {
      for (int j = 0; j < nblocks; ++j) {
        const int kj = kv_count + j;
        consumer_wait(k[kj % ST], phase_of(kj, ST));
        consumer_release(k[kj % ST]);
        consumer_wait(v[kj % ST], phase_of(kj, ST));
        consumer_release(v[kj % ST]);
      }
      kv_count += nblocks;
      continue;
    }
    float o_acc[D / 64][N / 2];
#pragma unroll
    for (int dh = 0; dh < D / 64; ++dh)
#pragma unroll
      for (int i = 0; i < N / 2; ++i) o_acc[dh][i] = 0.0f;
    const MaskBounds mb{t.len_q, t.len_k, -1, -1};
    consumer_wait(*piece_q, unsigned(pieces) & 1u);
    for (int j = 0; j < nblocks; ++j) {
      const int kj = kv_count + j;
      const unsigned k_slot = k_slots + unsigned((kj % ST) * plan.kv_bytes);
      consumer_wait(k[kj % ST], phase_of(kj, ST));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float s_acc[N / 2];
        unsigned p_pairs[N / 4];
        ptx::wgmma_fence();
        issue_qk<DTYPE, D, N, BN, 64>(s_acc, k_slot, 64 * h, q_stage);
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_operand(s_acc);
        if (h == 1) consumer_release(k[kj % ST]);
        s_to_p<DTYPE, ACT, kMaskNone, false, kUnit, N, 0, kTwice>(s_acc, p_pairs, p.logit_scale, f, 0, 0, mb);
        // The previous block's O^T, which read this stage, is complete (waited for below).
        store_pairs_trans<N, N>(p_stage, 64 * h, f, [&](int i) { return p_pairs[i]; });
      }
      ptx::fence_proxy_async_smem();  // generic stores -> the tensor cores' reads (async proxy)
      ptx::named_barrier_sync(bar, 128);
      consumer_wait(v[kj % ST], phase_of(kj, ST));
      ptx::wgmma_fence();
      issue_ot<DTYPE, D, N, BN, N>(o_acc, v_slots + unsigned((kj % ST) * plan.kv_bytes), p_stage);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
#pragma unroll
      for (int dh = 0; dh < D / 64; ++dh) ptx::fence_operand(o_acc[dh]);
      consumer_release(v[kj % ST]);
    }
    // O staged as [query][D] in the piece's Q stage (its last reader, the last S^T, is complete),
    // then the piece's rows copied out; the stage goes back to the producer once the copy has read it.
    const float scale = (kTwice ? 0.5f : 1.0f) * p.out_scale;
#pragma unroll
    for (int dh = 0; dh < D / 64; ++dh)
      store_pairs_trans<N, 64>(q_stage, 64 * dh, f, [&](int i) {
        return pack2<DTYPE>(o_acc[dh][2 * i] * scale, o_acc[dh][2 * i + 1] * scale);
      });
    ptx::named_barrier_sync(bar, 128);
    unsigned short* const out_rows = static_cast<unsigned short*>(p.out) +
                                     (long long)(t.q_row - t.m0 + piece.first) * row_stride + t.head() * D;
    copy_staged_rows<D, 64>(q_stage, out_rows, row_stride, piece.rows, tid);
    ptx::fence_proxy_async_smem();  // the copy's generic reads before the next TMA load into the stage
    __syncwarp();
    consumer_release(*piece_q);
    ++pieces;
    kv_count += nblocks;
  }
}

}  // namespace gdpa::sm90
