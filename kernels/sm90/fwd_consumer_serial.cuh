// fwd_consumer_serial.cuh — the three-consumer form's warpgroup (kFwdThreeConsumers): its key
// blocks in series, no pingpong turns.
// Part of the Hopper forward: gdpa_fwd.cu has the design, the roles and the kernel.
#pragma once
#include "fwd_consumer_ops.cuh"

namespace gdpa::sm90 {

// kFwdThreeConsumers: one of three consumer warpgroups, its blocks in series. Per key block j:
// P = act(S_j); then O += P V_j and S_j+1 = Q K_j+1^T issued as one batch, wait. One P buffer and
// no GEMM in flight across the activation, so S (32), O (64) and P (16) fit the 160 registers
// three consumer warpgroups leave; the tensor cores stay busy because the other two warpgroups
// issue while this one computes, and issuing PV and the next QK^T together saves a round trip to
// the tensor cores per block. No pingpong turns: three warpgroups interleave by themselves.
template <int DTYPE, int D, int ACT, int MASK, int FLAGS>
__device__ __forceinline__ void fwd_consumer_serial(int cw, const GdpaParams& p, const ptx::TensorMap* tm_o,
                                                    unsigned char* smem) {
  constexpr int BN = fwd_block_n(D, FLAGS);
  constexpr int BM = fwd_block_m(FLAGS);
  constexpr int QS = fwd_q_stages(FLAGS);
  constexpr int ST = fwd_kv_stages(FLAGS);
  constexpr FwdSmemPlan plan = fwd_smem_plan(D, FLAGS);
  constexpr bool kReuse = (FLAGS & kFwdKvReuse) != 0;
  constexpr bool kUnit = (FLAGS & kFwdUnitLogitScale) != 0;
  constexpr int kMix = act_mix_of(FLAGS);
  constexpr bool kTwice = (FLAGS & kFwdHalfFold) != 0 && use_twice_f<DTYPE, ACT, kMix>;
  static_assert((FLAGS & kFwdSoftmax) == 0, "the softmax variant keeps two consumer warpgroups");
  auto* bars = reinterpret_cast<FwdBarriers<FLAGS>*>(smem + plan.bar_off);
  const unsigned base_addr = ptx::smem_addr(smem);
  const int tid = int(threadIdx.x) - 128 * (cw + 1);
  const FragThread f = frag_thread(tid);
  const int row_stride = p.heads_q * D;
  auto phase_of = [](int count, int stages) { return unsigned(count / stages) & 1u; };
  auto k_tile = [&](int count) { return base_addr + plan.k_off + (count % ST) * plan.kv_bytes; };
  auto v_tile = [&](int count) { return base_addr + plan.v_off + (count % ST) * plan.kv_bytes; };
  // plan.o_in_q: the Q stage a tile's O was staged in goes back to the producer during the next
  // tile, once thread 0's TMA store has read it; the fence orders the threads' generic accesses to
  // it (staging, a partial tile's copy) before the TMA load that will overwrite it.
  auto release_staged_q = [&](int stage) {
    if (tid == 0) ptx::bulk_wait_group_read<0>();
    ptx::fence_proxy_async_smem();
    __syncwarp();
    consumer_release(bars->q[stage]);
  };

  float s_acc[BN / 2];
  unsigned p_acc[BN / 4];
  float o_acc[D / 2];
  RoleTracer<(FLAGS & kFwdTrace) != 0, kFwdTraceCtas, fwd_consumer_wgs(FLAGS), kFwdTraceSlots> trace(p, cw, tid == 0);
  int q_count = 0, kv_count = 0;
  int held_q = -1;  // plan.o_in_q: the stage holding the previous tile's staged O, not yet released
  int it, end, stride;
  cta_tiles(p, &it, &end, &stride);
  for (; it < end; it += stride) {
    const FwdTile cur = fwd_tile(p, it);
    trace(kFtTileStart, 0);
    const bool next_reuse = kReuse && it + stride < end && fwd_tile(p, it + stride).reuses_kv();
    const int row0 = cur.m0 + 64 * cw;
    unsigned short* const out_rows =
        static_cast<unsigned short*>(p.out) + (long long)(cur.q_row + 64 * cw) * row_stride + cur.head() * D;
    if (cur.empty()) {
      store_zero_rows<D>(out_rows, row_stride, cur.len_q - row0, f);
      continue;
    }
    const int nblocks = cur.n_end() - cur.n_begin();
    const bool fresh = !(kReuse && cur.reuses_kv());
    const int kvb = fresh ? kv_count : kv_count - nblocks;
    const bool release_kv = !next_reuse;
    const int qs = q_count % QS;
    const unsigned q_addr = base_addr + plan.q_off + qs * plan.q_bytes;
    consumer_wait(bars->q[qs], phase_of(q_count, QS));
    if (row0 >= cur.len_q) {
      // Rows all past the sequence's end: walk the slots (their empty barriers count every
      // consumer warp) without computing. A path of its own: a wgmma batch may not span a branch
      // (ptxas would serialize every wgmma of the kernel, C7520).
      for (int j = 0; j < nblocks; ++j) {
        const int kj = kvb + j;
        if (fresh) {
          consumer_wait(bars->k[kj % ST], phase_of(kj, ST));
          consumer_wait(bars->v[kj % ST], phase_of(kj, ST));
        }
        if (release_kv) {
          consumer_release(bars->k[kj % ST]);
          consumer_release(bars->v[kj % ST]);
        }
      }
      if (plan.o_in_q && held_q >= 0) release_staged_q(held_q);
      if (!plan.o_in_q) consumer_release(bars->q[qs]);
    } else {
      trace(kFtTurn, 0);
      if (fresh) consumer_wait(bars->k[kvb % ST], phase_of(kvb, ST));
      ptx::wgmma_fence();
      issue_qk<DTYPE, D, BN, BM>(s_acc, q_addr, 64 * cw, k_tile(kvb));
      ptx::wgmma_commit();
      trace(kFtQkIssued, 0);
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o_acc[i] = 0.0f;  // every PV accumulates: one wgmma sequence
      ptx::wgmma_wait<0>();
      ptx::fence_operand(s_acc);
      if (release_kv) consumer_release(bars->k[kvb % ST]);
      if (plan.o_in_q && held_q >= 0) release_staged_q(held_q);
      for (int j = 0;; ++j) {
        const int kj = kvb + j;
        const bool last = j == nblocks - 1;
        trace(kFtSReady, j);
        if (!plan.o_in_q && last) consumer_release(bars->q[qs]);
        activate_block<DTYPE, ACT, MASK, BN, kUnit, kMix, kTwice>(s_acc, p_acc, (cur.n_begin() + j) * BN, row0, cur, p,
                                                                  f);
        trace(kFtActDone, j);
        if (fresh) consumer_wait(bars->v[kj % ST], phase_of(kj, ST));
        if (last) {
          trace(kFtOperandsReady, j);
          ptx::wgmma_fence();
          issue_pv<DTYPE, D, BN, true>(o_acc, p_acc, v_tile(kj));
          ptx::wgmma_commit();
          trace(kFtPvIssued, j);
          ptx::wgmma_wait<0>();
          ptx::fence_operand(o_acc);
          ptx::fence_operand(p_acc);
          trace(kFtPvDone, j);
          if (release_kv) consumer_release(bars->v[kj % ST]);
          break;
        }
        if (fresh) consumer_wait(bars->k[(kj + 1) % ST], phase_of(kj + 1, ST));
        trace(kFtOperandsReady, j);
        ptx::wgmma_fence();
        issue_pv<DTYPE, D, BN, true>(o_acc, p_acc, v_tile(kj));
        issue_qk<DTYPE, D, BN, BM>(s_acc, q_addr, 64 * cw, k_tile(kj + 1));
        ptx::wgmma_commit();
        trace(kFtPvIssued, j);
        ptx::wgmma_wait<0>();
        ptx::fence_operand(o_acc);
        ptx::fence_operand(p_acc);
        ptx::fence_operand(s_acc);
        trace(kFtPvDone, j);
        if (release_kv) {
          consumer_release(bars->v[kj % ST]);
          consumer_release(bars->k[(kj + 1) % ST]);
        }
      }
      const float scale = (kTwice ? 0.5f : 1.0f) * p.out_scale;
      if constexpr (plan.o_in_q)  // this warpgroup's rows of the Q stage; no earlier store reads them
        store_block_tma<DTYPE, D, BM>(o_acc, q_addr + 64 * cw * kSw128RowBytes, tm_o, cur.head(), cur.q_row + 64 * cw,
                                      out_rows, row_stride, cur.len_q - row0, scale, f, tid, kBarEpilogueBase + cw,
                                      false);
      else
        store_block_tma<DTYPE, D>(o_acc, base_addr + plan.o_off + cw * plan.o_bytes, tm_o, cur.head(),
                                  cur.q_row + 64 * cw, out_rows, row_stride, cur.len_q - row0, scale, f, tid,
                                  kBarEpilogueBase + cw);
      trace(kFtEpilogueEnd, nblocks);
    }
    held_q = qs;
    if (fresh) kv_count += nblocks;
    ++q_count;
  }
  if (tid == 0) ptx::bulk_wait_group<0>();
}

}  // namespace gdpa::sm90
