// bwd_producer.cuh — the backward's TMA producer (one thread): K and V per work tile, Q and dO per
// step.
// Part of the Hopper backward: gdpa_bwd.cu has the design, the roles and the kernel.
#pragma once
#include "bwd_common.cuh"

namespace gdpa::sm90 {

// ---------------------------------------------------------------------------------------------
// Producer: one thread.
// ---------------------------------------------------------------------------------------------

template <int D, int MASK, bool PAIR, bool TRACE, bool RECORDS, bool K_FIRST>
__device__ __forceinline__ void bwd_producer(const GdpaParams& p, const ptx::TensorMap* tm_q, const ptx::TensorMap* tm_k,
                                             const ptx::TensorMap* tm_v, const ptx::TensorMap* tm_do,
                                             unsigned char* smem) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  auto* bars = reinterpret_cast<BwdBarriers*>(smem + plan.bar_off);
  PipeCounter<kBwdQStages> qc;
  PipeCounter<1> kvc;  // one K / V "stage", one phase per non-empty work tile
  BwdTracer<TRACE> trace(p, 2, true);
  int step = 0;  // CTA-lifetime step count, for the trace
  const BwdWalk<PAIR> walk;
  for (int it = walk.first; it < p.num_tiles; it += walk.stride) {
    const BwdTile t = bwd_tile<MASK, PAIR, RECORDS>(p, it);
    if (t.empty()) continue;  // the consumers write zeros and wait for nothing
    for (int ls = 0; ls < t.steps; ++ls, ++step) {
      const BwdStep st = bwd_step(t, p, ls);
      // Q and dO of one step share a slot: the consumers need both in the same step.
      const int s = qc.stage();
      producer_acquire(bars->qdo[s], qc.phase(), 2u * plan.q_bytes);
      // Rows past Lq arrive as zeros (jagged_load.cuh): dV and dK sum over these rows.
      const int q_row = t.q_seq_row + st.m * kBwdBlockM, q_end = t.q_seq_row + t.len_q;
      load_jagged_rows<D, kBwdBlockM, kBwdBlockM>(smem + plan.q_off + s * plan.q_bytes, 1, tm_q, &bars->qdo[s].full,
                                                  st.head, q_row, q_end, p.load_window_q, p.zero_rows,
                                                  ptx::kEvictNormal);
      load_jagged_rows<D, kBwdBlockM, kBwdBlockM>(smem + plan.do_off + s * plan.q_bytes, 1, tm_do, &bars->qdo[s].full,
                                                  st.head, q_row, q_end, p.load_window_q, p.zero_rows,
                                                  ptx::kEvictNormal);
      qc.advance();
      trace(kTrLoadQdo, step);
      if (ls == 0) {
        // K and V after the first Q / dO: that load is already in flight while the previous tile's
        // last step (which still reads K and V) finishes. V is released before K (its last reader,
        // dP^T, runs before the last dQ), so it is loaded first; with kBwdDvInV (K_FIRST) V holds
        // the staged dV until its store has read it, after K's release. Both are read once per
        // tile: evict first; Q and dO are re-read by every KV tile of the sequence.
        // Keys past Lk arrive as zeros: dQ sums over them.
        const int k_end = t.k_row - t.n0 + t.len_k;
        auto load_kv = [&](SlotBarriers& bar, int off, const ptx::TensorMap* map) {
          producer_acquire(bar, kvc.phase(), plan.kv_bytes);
          load_jagged_rows<D, kBwdBlockN, kBwdBlockN>(smem + off, 1, map, &bar.full, t.kv_head, t.k_row, k_end,
                                                      p.load_window_k, p.zero_rows, ptx::kEvictFirst);
        };
        if (K_FIRST) load_kv(bars->k, plan.k_off, tm_k);
        load_kv(bars->v, plan.v_off, tm_v);
        if (!K_FIRST) load_kv(bars->k, plan.k_off, tm_k);
        kvc.advance();
        trace(kTrLoadKv, step);
      }
    }
  }
}

}  // namespace gdpa::sm90
