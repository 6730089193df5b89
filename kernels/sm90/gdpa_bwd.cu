// gdpa_bwd.cu — the hand-scheduled Hopper GDPA backward (spec section 4): dK, dV and the fp32 dQ
// accumulator, on packed jagged batches. TMA + mbarrier pipelines, wgmma, explicit warp roles,
// persistent grid over the host's tile list (host/scheduler.h build_backward_tiles).
//
// A work tile is BlockN = 128 keys of one (sequence b, KV head hk). Its CTA keeps K and V resident
// in shared memory and walks, for each of the G query heads of the group and each 64-row query tile
// that can see the keys (mask_query_range), one "step":
//     S^T  = K Q^T,  dP^T = V dO^T                       (wgmma SS, 64 keys x 64 queries per warpgroup)
//     P^T  = act(logit_scale S^T),  dS^T = act'(logit_scale S^T) dP^T, both zero where masked
//     dV  += P^T dO,  dK += dS^T Q                       (wgmma RS: P^T / dS^T straight from registers)
//     dQ   = dS K   (dS^T through shared memory, both warpgroups' halves; fp32, bulk-added to global)
// Computing the transposed products puts P^T and dS^T in registers in exactly the A-operand layout
// of the dV / dK products (FA3's SdP_swapAB): no shuffle, no shared-memory round trip for them.
//
// Roles:
//   warpgroup 0, warp 0, one elected lane: the TMA producer. K and V once per work tile, Q and dO
//     per step through a kBwdQStages ring.
//   warpgroup 0, warp 1: the dQ writer. Bulk-reduces each finished dQ job from shared memory into
//     the fp32 accumulator (and orders those reduces in the deterministic mode); with kBwdPair,
//     in cluster rank 0, copies it into rank 1's shared memory instead (bwd_pair_send_step). With
//     kBwdDqRed (unordered mode) the consumers add their jobs from registers and the writer only
//     answers their barriers.
//   warpgroups 1 and 2: consumers, 64 keys each, taking turns at issuing their GEMM batches
//     (kBwdPingpong). dK and dV (64 x D fp32 each) live in registers for the whole work tile; GQA
//     sums the group's heads there, no atomics. With kBwdDqFinish (deterministic mode) a
//     consumer also finishes the dQ blocks it contributes to last: it announces each job at the
//     start of the step that stages it, the writer has the TMA unit load the block's partial
//     sum into shared memory meanwhile, and the consumer adds it to its own part in registers,
//     scales, rounds and stores the io-dtype rows (bwd_dq_announce,
//     bwd_dq_finish).
// Warps 2 and 3 of warpgroup 0 have no work and leave at once.
//
// Launch (host/sm90_bwd.cpp): grid = persistent_grid(tiles, SMs), CTA c runs tiles c, c + grid, ...
// (host/scheduler.h); 384 threads; dynamic shared memory bwd_smem_request(D) (bwd_config.h, with
// 1024 bytes of alignment slack). Tensor maps: Q and dO with 64-row boxes, K and V with 128-row
// boxes, 64 columns, 128B swizzle (host/tensor_map.h). Before it: the dQ accumulator zeroed (in the
// deterministic mode the semaphores instead: there the first contributor stores); after it:
// dq_convert.cu (with kBwdDqFinish: only the zeros of blocks no key tile sees). The fp32 dQ
// accumulator is not a tensor-map target: each dQ job is one contiguous 16 KB block
// (bwd_config.h), added with a 1-D bulk reduce. The dQ tensor map (tm_dq) covers the io-dtype dQ
// rows, for finished blocks stored by TMA (kBwdDqTmaStore).
// kBwdPair: clusters of two CTAs, grid = 2 x min(entries, resident clusters), one list entry per
// (sequence, KV head) (BwdWalk); nothing before the kernel and no dq_convert after it.
//
// Numerics (documented deviation, the forward does the same): the scales are folded out of the
// rounded products. The kernel rounds P = act(S) and dS = act'(S) dP to the io dtype and applies
// out_scale to dV and logit_scale * out_scale to dK here and to dQ in dq_convert.cu, one multiply
// per output instead of per score; the rounding point moves by one io-dtype rounding of s * x vs x.
//
// Masking: an (i, j) with j >= Lk, i >= Lq or outside the mask gives P = 0 AND dS = 0 by selection
// (never by multiplication, so garbage logits of other sequences' rows cannot leak NaN through
// act). Blocks that need no mask run a compare-free path. dQ jobs only ever add into their own
// sequence's accumulator rows (bwd_config.h). Known limit shared with the forward: rows past a
// sequence end are the next sequence's real rows, and a 0 * Inf from them in the tensor-core
// products (an Inf in the next sequence's Q / dO times a masked dS / P = 0, or in its K times a
// masked dS) would reach this sequence's dK / dV / dQ; finite inputs are unaffected.
#include "../common/activations.cuh"
#include "../common/bool_constant.h"
#include "../common/masks.cuh"
#include "../common/params.h"
#include "../../ptx/cluster.cuh"
#include "../../ptx/common.cuh"
#include "../../ptx/fence.cuh"
#include "../../ptx/mbarrier.cuh"
#include "../../ptx/regs.cuh"
#include "../../ptx/smem_desc.h"
#include "../../ptx/tma.cuh"
#include "../../ptx/wgmma.cuh"
#include "act_mix.h"
#include "bwd_config.h"
#include "dq_semaphore.cuh"
#include "epilogue.cuh"
#include "fragments.cuh"
#include "jagged_load.cuh"
#include "pipeline.cuh"
#include "trace.cuh"

namespace gdpa::sm90 {

// kBwdTrace's recorder: the two consumer warpgroups (roles 0, 1) and the producer (role 2).
template <bool ON>
using BwdTracer = RoleTracer<ON, kBwdTraceCtas, kBwdTraceRoles, kBwdTraceSlots>;

// The dQ hand-off between consumer warpgroup cw and the writer warp follows FA3's full/empty
// protocol on a pair of mbarriers per consumer (BwdBarriers::dq_full / dq_empty): the consumer's
// four warps arrive on full after storing a job, the writer's leader lane arrives on empty once
// the bulk reduce has read it. See bwd_dq_finish / bwd_dq_writer for the phases.

// Registers per thread after reallocation: (24 + 2 x 240) x 128 = 64,512, exactly what the launch
// reserved (384 threads x 168). Consumers hold dK and dV (D/2 fp32 each) for a whole work tile plus
// S^T, dP^T (32 each), P^T, dS^T (16 packed each) and a dQ job (32).
constexpr int kBwdProducerRegs = 24;
constexpr int kBwdConsumerRegs = 240;
constexpr unsigned kBwdConsumerWarps = 4 * kBwdConsumerWarpgroups;
// Named barriers (0 is __syncthreads): one per consumer warpgroup for its staged epilogue, one
// per consumer warpgroup for its GEMM turn (kBwdPingpong).
constexpr int kBwdBarEpilogueBase = 1;
constexpr int kBwdBarTurnBase = kBwdBarEpilogueBase + kBwdConsumerWarpgroups;

// kBwdPingpong: both warpgroups run the same steps of the same tiles and take two turns per step
// (S^T and dP^T; dV, dK and the dQ job), so the turns strictly alternate; no wait inside a turn
// depends on the other warpgroup's next turn.
template <int FLAGS>
using BwdTurns = ConsumerTurns<(FLAGS & kBwdPingpong) != 0, kBwdBarTurnBase>;

// Everything about one work tile that producer, writer and consumers need: the host's record
// (kBwdTileRecords) or the same fields derived from the tile list (bwd_tile).
struct BwdTile : BwdTileRecord {
  __device__ bool empty() const { return steps <= 0; }
};

// The entries of the host's tile list this CTA runs, and which KV tile of an entry is its own.
// Without kBwdPair: entries blockIdx.x, + gridDim.x, ..., each one KV tile. With it the grid is
// made of clusters of two CTAs (consecutive blockIdx.x); cluster c runs entries c, + gridDim.x / 2,
// ..., each naming KV tile 0 of a (sequence, KV head), and the CTA of cluster rank r runs KV tile
// r of it, so the two KV tiles of a sequence run side by side.
template <bool PAIR>
struct BwdWalk {
  int first, stride;
  __device__ __forceinline__ BwdWalk() {
    first = PAIR ? int(blockIdx.x >> 1) : int(blockIdx.x);
    stride = PAIR ? int(gridDim.x >> 1) : int(gridDim.x);
  }
  __device__ __forceinline__ static int kv_tile_add() { return PAIR ? int(ptx::cluster_ctarank()) : 0; }
};

// Record index of entry `index` of the tile list for this CTA.
template <bool PAIR>
__device__ __forceinline__ int bwd_record_index(int index) {
  return PAIR ? 2 * index + BwdWalk<PAIR>::kv_tile_add() : index;
}

// Entry `index` of the tile list. RECORDS (kBwdTileRecords): the host's record, three 16-byte
// loads with no dependence between them. Otherwise derived here (bwd_tile_record, as the host
// does): the entry, then the sequence's offsets (a second, dependent load), then the mask's query
// range; the trace put about 1k cycles of each tile boundary before a consumer has its tile this way.
template <int MASK, bool PAIR, bool RECORDS>
__device__ __forceinline__ BwdTile bwd_tile(const GdpaParams& p, int index) {
  if constexpr (RECORDS) {
    const int4* r = static_cast<const int4*>(p.tile_records) + 4 * bwd_record_index<PAIR>(index);
    const int4 a = r[0], b = r[1], c = r[2];
    return BwdTile{{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, c.x, c.y}};
  } else {
    const int4 w = reinterpret_cast<const int4*>(p.tiles)[index];  // {batch, KV head, KV tile, work}
    const int b = w.x;
    const int n0 = (w.z + BwdWalk<PAIR>::kv_tile_add()) * kBwdBlockN;
    const int k_begin = p.cu_seqlens_k[b];
    const int len_k = p.cu_seqlens_k[b + 1] - k_begin;
    const int q_begin = p.cu_seqlens_q[b];
    const int len_q = p.cu_seqlens_q[b + 1] - q_begin;
    return BwdTile{bwd_tile_record(MASK, b, w.y, n0, k_begin, len_k, q_begin, len_q, p.window_left, p.window_right,
                                   p.group)};
  }
}

// Step `ls` (0-based within the tile) visits query head kv_head * G + g and query tile m; heads are
// the outer loop so consecutive steps of one head stream neighbouring Q / dO rows.
struct BwdStep {
  int head, m;
};
__device__ __forceinline__ BwdStep bwd_step(int m_begin, int m_end, int kv_head, int group, int ls) {
  const int nm = m_end - m_begin;
  const int g = ls / nm;
  return BwdStep{kv_head * group + g, m_begin + (ls - g * nm)};
}
__device__ __forceinline__ BwdStep bwd_step(const BwdTile& t, const GdpaParams& p, int ls) {
  return bwd_step(t.m_begin, t.m_end, t.kv_head, p.group, ls);
}
// Step ls + 1 from step ls, without bwd_step's division. A division by a run-time count compiles
// to a chain of about 17 dependent conversions and uniform multiplies (I2F, MUFU.RCP, F2I, R2UR,
// UIMAD.WIDE, ...), and ptxas placed the dQ job header's at each step's start, ahead of the wait
// for Q and dO: the warpgroup's whole step waited for it (PERF_NOTES, twenty-fourth session).
__device__ __forceinline__ BwdStep bwd_next_step(BwdStep s, int m_begin, int m_end) {
  if (++s.m == m_end) {
    s.m = m_begin;
    ++s.head;
  }
  return s;
}

// What the writer needs to know about consumer cw's k-th dQ job, in slot dq_job[cw][k & 1]: written
// by thread 0 of the consumer before its dq_full arrival (kBwdDqFinish: before its dq_announce
// arrival, at the start of the step that stages the job), read by the writer after the matching
// wait. Two slots, because with
// kBwdDqFinish the next job is announced while the writer may still be adding this one.
struct DqTmaBox {
  int col, row;  // the dQ map's coordinates of the 64 x 64 box: head * D + column, global query row
};
struct DqJobHeader {
  float* dst;  // the job's 4096-float block of the accumulator
  int* sem;    // deterministic mode: the (slot, head) semaphore
  union {
    unsigned short* out;  // kDqJobLast: dQ element (first row, first column) of the job
    DqTmaBox box;         // kDqJobTmaStore instead: where the writer's TMA store puts it
  };
  int expected;  // deterministic mode: the count to wait for (KV tiles of the group ahead of ours)
  int flags;     // kDqJobLast, kDqJobPartial, kDqJobTmaStore
  int rows;      // kDqJobLast: rows of the job inside the sequence
  int pad;
};
// kBwdDqFinish: no later KV tile contributes to the job's block, so it is finished, not added ...
constexpr int kDqJobLast = 1;
// ... and earlier ones did: their partial sum is loaded from the accumulator first.
constexpr int kDqJobPartial = 2;
// kBwdDqTmaStore: a finished job whose 64 rows lie inside the sequence; its consumer only stages
// the rows, and the writer stores them by TMA (bwd_store_finished_job).
constexpr int kDqJobTmaStore = 4;

// The Q / dO ring and the resident K / V, all on mbarriers (pipeline.cuh's protocol): full =
// 1 producer arrival + TMA bytes, empty = one arrival per consumer warp (8). The dS exchange
// buffers: full = empty = one arrival per consumer warp of both warpgroups (8).
struct BwdBarriers {
  SlotBarriers k, v;
  SlotBarriers qdo[kBwdQStages];
  unsigned long long ds_full[kBwdDsStages];
  unsigned long long ds_empty[kBwdDsStages];
  // dQ staging handoff between consumer `cw` and the writer warp: full when the consumer's 128
  // threads have stored a job and its header, empty when the writer's bulk operation (the reduce,
  // the copy to the partner CTA or the TMA store of a finished block) has read it.
  // mbarriers (release on arrive, acquire on wait) rather than named-barrier arrive/sync pairs:
  // compute-sanitizer's racecheck sees mbarrier ordering for the plain header stores and loads.
  // Index [cw][b]: buffer b of DqStage (b = 0 only, unless kBwdDqTwoStage).
  unsigned long long dq_full[kBwdConsumerWarpgroups][2];
  unsigned long long dq_empty[kBwdConsumerWarpgroups][2];
  // kBwdDqFinish without kBwdPair: consumer cw's k-th job is announced on dq_announce[cw][k & 1]
  // (its header is ready, its product not yet), and the writer answers on dq_partial[cw] once per
  // job, with the partial sum's bytes for a last job that has one (the TMA load into partial
  // buffer cw).
  unsigned long long dq_announce[kBwdConsumerWarpgroups][2];
  unsigned long long dq_partial[kBwdConsumerWarpgroups];
  // kBwdPair: the partner CTA's part of a chunk consumer cw finishes lands in partial buffer cw and
  // completes pair_full[cw] (the partner's writer arrives with the byte count, its bulk copy brings
  // the bytes); consumer cw of the partner arrives on our pair_empty[cw] once it has read the part
  // our writer copied to it, so that our staging buffer and its partial buffer may be rewritten.
  unsigned long long pair_full[kBwdConsumerWarpgroups];
  unsigned long long pair_empty[kBwdConsumerWarpgroups];
  DqJobHeader dq_job[kBwdConsumerWarpgroups][2];
};

// Index of a consumer's dQ job among its own jobs, from the step it belongs to: at D = 128 every
// step gives each consumer one job, at D = 64 they alternate (bwd_dq_owner_chunk), so the k-th
// handoff on a consumer's staging buffer uses phase parity k & 1 on both sides.
template <int D>
__device__ __forceinline__ int dq_job_index(int step) {
  return D / kBwdDqCols == 2 ? step : step >> 1;
}

// How many dQ jobs consumer cw had in steps [0, step) of the CTA's lifetime: every step at D = 128,
// steps cw, cw + 2, ... at D = 64 (bwd_dq_owner_chunk). The next job's index (dq_job_index).
template <int D>
__device__ __forceinline__ int dq_jobs_before(int step, int cw) {
  return D / kBwdDqCols == 2 ? step : (step > cw ? (step - cw + 1) >> 1 : 0);
}

// Consumer cw's two 16 KB dQ buffers (bwd_config.h, the shared-memory plan): its staging buffer
// and its partial-sum buffer. Byte offset from the aligned shared-memory base.
enum DqBuffer : int { kDqStaging = 0, kDqPartial = 1 };
template <int D>
__device__ __forceinline__ unsigned dq_buffer_off(int cw, int buffer) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  return unsigned(buffer == kDqStaging ? plan.dq_off : plan.partial_off) + unsigned(cw * kBwdDqJobBytes);
}

// Where consumer cw's k-th dQ job is staged (a DqBuffer) and which phase of that buffer's full /
// empty pair it is. One buffer (the staging buffer): every job, parity k & 1. TWO (kBwdDqTwoStage):
// job k in buffer k & 1 (the staging buffer, then the partial-sum buffer), so each buffer sees every
// other job and its pair's parity is (k / 2) & 1; job k + 2 reuses job k's buffer and header slot
// once the writer has read job k. Rank 0 of a pair with kBwdPairTwoStage does the same (it receives
// nothing, so its partial-sum buffer is free): `two` is a run-time value there, a constant elsewhere.
struct DqStage {
  bool two;
  __device__ __forceinline__ int buffer(unsigned k) const { return two ? int(k & 1u) : int(kDqStaging); }
  __device__ __forceinline__ unsigned parity(unsigned k) const { return two ? (k >> 1) & 1u : k & 1u; }
  // Jobs that precede the one that next reuses job k's buffer: wait for job k - depth()'s read.
  __device__ __forceinline__ unsigned depth() const { return two ? 2u : 1u; }
};

// Where a consumer's dQ jobs are staged, the same for the consumers and the writer: two buffers on
// the accumulator path (TWO, kBwdDqTwoStage) and on rank 0 of a pair with kBwdPairTwoStage
// (PAIR_TWO; its partial-sum buffer receives nothing), one otherwise.
template <bool TWO, bool PAIR_TWO>
__device__ __forceinline__ DqStage dq_stage_of() {
  return DqStage{TWO || (PAIR_TWO && ptx::cluster_ctarank() == 0)};
}

// The per-tile scalars a consumer needs during the steps: the tile's record and the dQ slot of
// its first query tile. They are the same in every thread of the CTA; bwd_consumer passes each
// record field through a lane-0 shuffle so that ptxas knows it and keeps them in uniform
// registers: at D = 128 a consumer thread's 240 vector registers hold 208 of wgmma fragments, and
// eight more vector registers of scalars made ptxas spill.
struct BwdTileScalars : BwdTileRecord {
  int slot0;  // dQ slot of the sequence's query tile 0
};

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

// ---------------------------------------------------------------------------------------------
// dQ writer: one warp. Jobs arrive in the consumers' step order; job (step j, column chunk c) is
// produced by consumer warpgroup (j + c) % 2 (see bwd_dq_owner_chunk).
// ---------------------------------------------------------------------------------------------

// kBwdDqTmaStore: the staged rows of a finished job leave by one TMA store of the 64 x 64 box.
template <int D>
__device__ __forceinline__ void bwd_store_finished_job(const DqJobHeader& h, const ptx::TensorMap* tm_dq,
                                                       const unsigned char* staging) {
  ptx::tma_store_3d(tm_dq, ptx::smem_addr(staging), h.box.col % D, h.box.col / D, h.box.row);
  ptx::bulk_commit_group();
}

// kBwdPair, one step of the writer. Rank 0 sends: the step's jobs (one per consumer at D = 128,
// one in turn at D = 64) go from the consumers' staging buffers into rank 1's partial buffers of
// the same consumer index, and each staging buffer is given back once rank 1 has read the copy
// (its only completion signal). Rank 1 finishes: its consumers add the parts and stage the rows;
// with TMA (kBwdDqTmaStore) this warp stores a job of whole rows and gives the buffer back once
// the store has read it, otherwise the consumers copied the rows and their dq_full arrival
// already says the buffer is free. `k` is each owner's job index of this step (dq_job_index),
// also its copy index. `stage`: the consumers' staging buffers (rank 0 with kBwdPairTwoStage: two,
// so that a consumer stages its next job while rank 1 has not yet read the previous copy).
template <int D, bool TMA, bool FENCE>
__device__ __forceinline__ void bwd_pair_send_step(int step, unsigned k, DqStage stage, BwdBarriers* bars,
                                                   unsigned char* smem, const ptx::TensorMap* tm_dq, bool leader) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  constexpr int kChunks = D / kBwdDqCols;
  const bool sender = ptx::cluster_ctarank() == 0;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int owner = (step + c) & 1;  // bwd_dq_owner_chunk
    const int b = stage.buffer(k);
    ptx::mbarrier_wait(&bars->dq_full[owner][b], stage.parity(k));
    if (FENCE && leader) ptx::fence_proxy_async_smem();  // kBwdDqFenceAtWriter
    const unsigned char* staging = smem + dq_buffer_off<D>(owner, b);
    if (sender && leader) {
      const unsigned buf = ptx::smem_addr(smem + dq_buffer_off<D>(owner, kDqPartial));
      const unsigned full = ptx::map_shared_rank(ptx::smem_addr(&bars->pair_full[owner]), 1u);
      ptx::mbarrier_arrive_expect_tx_remote(full, kBwdDqJobBytes);
      ptx::bulk_copy_s2c(ptx::map_shared_rank(buf, 1u), staging, kBwdDqJobBytes, full);
    }
    if (TMA && !sender && leader) {
      const DqJobHeader& h = bars->dq_job[owner][k & 1];
      if (h.flags & kDqJobTmaStore) bwd_store_finished_job<D>(h, tm_dq, staging);
    }
    __syncwarp();
  }
  if (TMA && !sender && leader) ptx::bulk_wait_group_read<0>();  // the stores have read the staging buffers
  __syncwarp();
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int owner = (step + c) & 1;
    if (sender) ptx::mbarrier_wait_cluster(&bars->pair_empty[owner], k & 1u);
    if (leader) ptx::mbarrier_arrive(&bars->dq_empty[owner][stage.buffer(k)]);
    __syncwarp();
  }
}

// The warp runs with the producer warpgroup's 24 registers, so it decodes nothing per job: it
// only counts steps (bwd_tile's step count, the same as the consumers') to know how many jobs come
// and from which staging buffer, and takes addresses and semaphores from the job headers.
// FINISH (kBwdDqFinish; the host sets it in the deterministic mode only): each step's jobs are
// first taken from their announcements, made while the consumers still compute them; for a last
// job the semaphore wait happens there and its partial sum is loaded for the consumer (dq_partial
// is answered for every job, so both sides count phases by job). Then the staged jobs are added as
// usual, except the last ones, which their consumers have finished: stored themselves, or, with
// TMA (kBwdDqTmaStore) and whole rows, staged for this warp's TMA store.
//
// PAIR (kBwdPair, with FINISH): no accumulator, no semaphores, no announcements (the CTA's rank
// says what every job is). The CTA of cluster rank 0 (KV
// tile 0) sends its part of every job to rank 1 (KV tile 1), which finishes the blocks: rank 1
// runs a little behind and waits for nothing else, while rank 0 never waits for data, only for
// rank 1 to have read its previous copy (bwd_pair_send_step). The job of (step, chunk) is done by
// the consumer of the same index in both CTAs, since both run the same steps.
template <int D, int MASK, bool FINISH, bool PAIR, bool TMA, bool TWO, bool PAIR_TWO, bool RED, bool RECORDS,
          bool FENCE>
__device__ __forceinline__ void bwd_dq_writer(const GdpaParams& p, const ptx::TensorMap* tm_dq, unsigned char* smem) {
  static_assert(!PAIR || FINISH, "kBwdPair: the finishing code");
  static_assert(!(TWO && FINISH), "kBwdDqTwoStage: the partial-sum buffer is the finish's");
  static_assert(!(RED && FINISH), "kBwdDqRed: the unordered accumulator path only");
  const DqStage stage = dq_stage_of<TWO, PAIR_TWO>();
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  constexpr int kChunks = D / kBwdDqCols;
  auto* bars = reinterpret_cast<BwdBarriers*>(smem + plan.bar_off);
  const bool leader = ptx::lane_id() == 0;
  int step = 0;  // the consumers' CTA-lifetime step counter, reproduced
  // Deterministic mode: the previous step's semaphore. Its adds are waited for (landed in global
  // memory) and it is released at the start of the next step, not before the staging buffers are
  // given back: the consumers need their buffer once the bulk operations have read it, and the
  // landing takes about as long again. Released before anything of the next step waits on a
  // semaphore, which may be this very one (the next tile's first block can be this tile's last).
  int* pending = nullptr;
  auto release_pending = [&] {
    if (leader && pending != nullptr) {
      ptx::bulk_wait_group<0>();
      semaphore_release(pending);
    }
    pending = nullptr;
  };
  const BwdWalk<PAIR> walk;
#pragma unroll 1
  for (int it = walk.first; it < p.num_tiles; it += walk.stride) {
    const int steps = bwd_tile<MASK, PAIR, RECORDS>(p, it).steps;
#pragma unroll 1
    for (int ls = 0; ls < steps; ++ls, ++step) {
      const unsigned k = unsigned(dq_job_index<D>(step));  // each owner's job index this step
      int* sem = nullptr;
      release_pending();
      if constexpr (FINISH && !PAIR) {  // pairs announce nothing (bwd_dq_finish)
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int owner = (step + c) & 1;
          ptx::mbarrier_wait(&bars->dq_announce[owner][k & 1], (k >> 1) & 1u);
          if (leader) {
            const DqJobHeader& h = bars->dq_job[owner][k & 1];
            unsigned long long* bar = &bars->dq_partial[owner];
            // Only a last job waits for the earlier contributors here (its partial sum must be
            // complete before the load); the others wait when they add, as without FINISH, so
            // that their consumers keep a step of slack against the other CTAs.
            if ((h.flags & kDqJobLast) && c == 0 && p.deterministic) semaphore_wait(h.sem, h.expected);
            if (h.flags & kDqJobPartial) {
              ptx::mbarrier_arrive_expect_tx(bar, kBwdDqJobBytes);
              ptx::bulk_copy_g2s(smem + dq_buffer_off<D>(owner, kDqPartial), h.dst, kBwdDqJobBytes, bar,
                                 ptx::kEvictFirst);
            } else {
              ptx::mbarrier_arrive(bar);
            }
          }
          __syncwarp();
        }
      }
      if constexpr (PAIR) {
        bwd_pair_send_step<D, TMA, FENCE>(step, k, stage, bars, smem, tm_dq, leader);
      } else {
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int owner = (step + c) & 1;  // bwd_dq_owner_chunk: chunk c of step j is WG (j + c) % 2
          const int b = stage.buffer(k);
          ptx::mbarrier_wait(&bars->dq_full[owner][b], stage.parity(k));  // buffer b of owner holds the job
          if (!RED && leader) {  // RED: the consumer added the job itself; only the phases go on
            if (FENCE) ptx::fence_proxy_async_smem();  // kBwdDqFenceAtWriter
            const DqJobHeader& h = bars->dq_job[owner][k & 1];
            // Both chunks of a step belong to the same (slot, head): one wait, one release.
            if (c == 0 && p.deterministic && !(FINISH && (h.flags & kDqJobLast))) semaphore_wait(h.sem, h.expected);
            sem = h.sem;
            const float* staged = reinterpret_cast<const float*>(smem + dq_buffer_off<D>(owner, b));
            // Deterministic mode: the first contributor (in the fixed KV order) stores, the others
            // add, so the accumulator needs no zeroing pass; blocks nobody writes are recognised by
            // their semaphore (0) in dq_convert.cu. A last job (FINISH) is finished: its consumer
            // stored the rows, or staged them for our TMA store (kBwdDqTmaStore).
            if (!FINISH || !(h.flags & kDqJobLast)) {
              if (p.deterministic && h.expected == 0)
                ptx::bulk_copy_s2g(h.dst, staged, kBwdDqJobBytes);
              else
                ptx::bulk_reduce_add_f32(h.dst, staged, kBwdDqJobBytes);
              ptx::bulk_commit_group();
            } else if (TMA && (h.flags & kDqJobTmaStore)) {
              bwd_store_finished_job<D>(h, tm_dq, reinterpret_cast<const unsigned char*>(staged));
            }
          }
          __syncwarp();  // bar.sync is .aligned: the whole warp reaches the next one together
        }
        if (leader) ptx::bulk_wait_group_read<0>();  // staging may be overwritten
        __syncwarp();
        if (leader)
#pragma unroll
          for (int c = 0; c < kChunks; ++c) ptx::mbarrier_arrive(&bars->dq_empty[(step + c) & 1][stage.buffer(k)]);
        // A finished step has no adds; its count still rises, so dq_convert knows the block was written.
        if (p.deterministic) pending = sem;
      }
    }
  }
  release_pending();
  if (leader) ptx::bulk_wait_group<0>();
}

// ---------------------------------------------------------------------------------------------
// Consumer helpers: one warpgroup, 64 keys.
// ---------------------------------------------------------------------------------------------

// Acc (64 keys x 64 queries) = rows [first_row, +64) of a resident [BlockN][D] tile (K or V) times
// a [BlockM][D] tile (Q or dO) transposed: both operands K-major (D contiguous), D/16 wgmmas.
template <int DTYPE, int D>
__device__ __forceinline__ void issue_keys_x_tile(float (&acc)[32], unsigned kv_tile, int first_row, unsigned qd_tile) {
  // Stepped descriptors (ptx/smem_desc.h): encoded once here, one add per wgmma below.
  const WgmmaDescBase kv = sw128_kmajor_base(kv_tile + unsigned(first_row) * kSw128RowBytes);
  const WgmmaDescBase qd = sw128_kmajor_base(qd_tile);
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const unsigned long long a = kv.at(sw128_kmajor_step(kBwdBlockN, ks));
    const unsigned long long b = qd.at(sw128_kmajor_step(kBwdBlockM, ks));
    if (ks == 0)  // the first k16 slice overwrites the accumulator (scale-d is an immediate)
      ptx::Wgmma<64, DTYPE>::template ss<0, 0, 0>(acc, a, b);
    else
      ptx::Wgmma<64, DTYPE>::template ss<1, 0, 0>(acc, a, b);
  }
}

// Acc (64 keys x D) += A (64 keys x 64 queries, registers) times a [BlockM][D] tile (dO or Q):
// the reduction runs over the tile's rows, so the tile is an N-major B (TRANS_B = 1). k16 slice kk
// of A is packed registers 4kk .. 4kk+3 (fragments.cuh). Always accumulates: dK and dV are zeroed
// by ordinary moves at the start of a work tile, so no run-time scale-d is needed.
template <int DTYPE, int D>
__device__ __forceinline__ void issue_acc_rs(float (&acc)[D / 2], const unsigned (&a)[16], unsigned b_tile) {
  const WgmmaDescBase b = sw128_mnmajor_base(b_tile, kBwdBlockM);
#pragma unroll
  for (int kk = 0; kk < kBwdBlockM / 16; ++kk) {
    const unsigned frag[4] = {a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3]};
    ptx::Wgmma<D, DTYPE>::template rs<1, 1>(acc, frag, b.at(sw128_mnmajor_step(kk)));
  }
}

// f and f' of two neighbouring elements. fast_gelu_bf16 evaluates both lanes in one packed bf16x2
// pass (what ActImpl<kFastGeluBf16> does per element) and keeps f' in fp32 from that tanh.
template <int ACT>
__device__ __forceinline__ void act_f_df2(float x0, float x1, float* f0, float* f1, float* d0, float* d1) {
  if constexpr (ACT == kFastGeluBf16) {
    unsigned fb, tb;
    fast_gelu_bf16x2(x0, x1, &fb, &tb);
    *f0 = bf16x2_lo(fb);
    *f1 = bf16x2_hi(fb);
    const float t0 = bf16x2_lo(tb), t1 = bf16x2_hi(tb);
    const float h0 = 0.5f * x0, h1 = 0.5f * x1;
    *d0 = gelu_tanh_df_from_t(x0 * x0, t0, act_math::fma_f(h0, t0, h0));
    *d1 = gelu_tanh_df_from_t(x1 * x1, t1, act_math::fma_f(h1, t1, h1));
  } else {
    act_f_df<ACT>(x0, f0, d0);
    act_f_df<ACT>(x1, f1, d1);
  }
}

// P^T = act(logit_scale S^T) and act'(logit_scale S^T) from the S^T accumulator (64 keys x 64
// queries, fp32): P^T packed to the io dtype, act' written over S^T. MIX > 0: fast_gelu's
// 8-column blocks chosen by act_mix_alu_block (act_mix.h) take f and f' from gelu_poly on the FMA
// pipe instead of tanh.approx (pair i lies in block i / 2). TWICE (kBwdHalfFold): P^T holds
// round(2 f), one multiply per score fewer (act_twice_f_df); the dV epilogue halves it back,
// exactly, as the forward does with O. dS is unchanged.
template <int ACT, bool UNIT_SCALE, int MIX, bool TWICE>
__device__ __forceinline__ void act_pair(const float (&s)[32], int i, float logit_scale, float* f0, float* f1,
                                         float* d0, float* d1) {
  static_assert(!(TWICE && MIX > 0), "the doubled form is not mixed");
  const float x0 = UNIT_SCALE ? s[2 * i] : s[2 * i] * logit_scale;
  const float x1 = UNIT_SCALE ? s[2 * i + 1] : s[2 * i + 1] * logit_scale;
  if constexpr (TWICE) {
    act_twice_f_df<ACT>(x0, f0, d0);
    act_twice_f_df<ACT>(x1, f1, d1);
  } else if (ACT == kFastGelu && MIX > 0 && act_mix_alu_block(i >> 1, MIX)) {
    act_f_df2<kGeluPoly>(x0, x1, f0, f1, d0, d1);
  } else {
    act_f_df2<ACT>(x0, x1, f0, f1, d0, d1);
  }
}

// S^T, dP^T -> P^T and dS^T = act'(logit_scale S^T) dP^T, packed to the io dtype in place of the
// accumulators (ptxas puts each packed array in the register block of the accumulator it
// replaces), in one pass after both products landed. No mask here: blocks that need one zero the
// disallowed entries afterwards (mask_p_ds), so the heavy loop is the same code, with the same
// small register footprint, for both kinds of block.
template <int DTYPE, int ACT, bool UNIT_SCALE, int MIX, bool TWICE>
__device__ __forceinline__ void scores_to_p_ds(const float (&s)[32], const float (&dp)[32], unsigned (&pk)[16],
                                               unsigned (&dsk)[16], float logit_scale) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float f0, f1, d0, d1;
    act_pair<ACT, UNIT_SCALE, MIX, TWICE>(s, i, logit_scale, &f0, &f1, &d0, &d1);
    pk[i] = pack2<DTYPE>(f0, f1);
    dsk[i] = pack2<DTYPE>(d0 * dp[2 * i], d1 * dp[2 * i + 1]);
  }
}

// kBwdEarlyAct, the same in two halves: scores_to_p_dact needs S^T only and leaves act' in S^T's
// registers, and runs while the dP^T product is still in flight (its accumulator untouched);
// dact_to_ds multiplies by dP^T once it has landed. Same operations, same bits. ptxas keeps act'
// (32), P^T (16) and the in-flight dP^T (32) next to dK and dV (128) without spilling, but it
// schedules the wait for dP^T itself: about 12 of the 32 tanh.approx come before it (SASS at
// D = 128, fast_gelu), the rest after. Fences around the wait do not move it (they are no SASS
// instruction to order against), and a branch or a trap there makes ptxas serialize or spill.
// The non-split form above stays for the other paths: split there, some activations spill
// (gelu_poly at D = 64) or serialize (hardswish).
template <int DTYPE, int ACT, bool UNIT_SCALE, int MIX, bool TWICE>
__device__ __forceinline__ void scores_to_p_dact(float (&s)[32], unsigned (&pk)[16], float logit_scale) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float f0, f1, d0, d1;
    act_pair<ACT, UNIT_SCALE, MIX, TWICE>(s, i, logit_scale, &f0, &f1, &d0, &d1);
    pk[i] = pack2<DTYPE>(f0, f1);
    s[2 * i] = d0;
    s[2 * i + 1] = d1;
  }
}

template <int DTYPE>
__device__ __forceinline__ void dact_to_ds(const float (&dact)[32], const float (&dp)[32], unsigned (&dsk)[16]) {
#pragma unroll
  for (int i = 0; i < 16; ++i) dsk[i] = pack2<DTYPE>(dact[2 * i] * dp[2 * i], dact[2 * i + 1] * dp[2 * i + 1]);
}

// Zeroes the packed P^T and dS^T entries of disallowed or out-of-range (key, query) pairs by
// clearing their 16-bit halves: a selection, never a multiplication, so the garbage of another
// sequence's rows (possibly Inf or NaN) cannot leak. Fragment row = key (key0 + row), column =
// query (query0 + col); the low half of a packed pair is the lower column. A thread's pairs sit on
// two keys only (rows g and g + 8 of its warp's 16), so its mask is two query intervals
// (bwd_query_interval): a subtract and an unsigned compare per element.
template <int MASK>
__device__ __forceinline__ void mask_p_ds(unsigned (&pk)[16], unsigned (&dsk)[16], const FragThread& f, int key0,
                                          int query0, const MaskBounds& mb) {
  int lo[2], count[2];  // per key row (pair i & 1)
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    bwd_query_interval(MASK, key0 + pair_row(f, e), mb.len_q, mb.len_k, mb.window_left, mb.window_right, &lo[e],
                       &count[e]);
    // pair_col(f, i) = 8 (i / 2) + 2 t, so query - lo = 8 (i / 2) - (lo - query0 - 2 t).
    lo[e] -= query0 + 2 * f.t;
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int c = 8 * (i >> 1) - lo[i & 1];
    const unsigned keep = (unsigned(c) < unsigned(count[i & 1]) ? 0x0000FFFFu : 0u) |
                          (unsigned(c + 1) < unsigned(count[i & 1]) ? 0xFFFF0000u : 0u);
    pk[i] &= keep;
    dsk[i] &= keep;
  }
}

// True when some (key, query) of keys [key_lo, key_lo + 63] x queries [q_lo, q_lo + 63] is
// disallowed or out of range: only those blocks pay for the compares. Out of range alone would
// not need the mask any more (K, V, Q and dO rows past the end are zeros, jagged_load.cuh, so
// P^T = act(0) = 0 and dS^T = act'(0) * 0 = 0 there, as in the forward), but without the range
// test ptxas spilled a register in the consumers of two D = 128 variants (pairs, causal), so the
// edge blocks keep their mask pass.
template <int MASK>
__device__ __forceinline__ bool bwd_block_needs_mask(int key_lo, int q_lo, int len_q, int len_k, const GdpaParams& p) {
  const int key_hi = key_lo + 63, q_hi = q_lo + kBwdBlockM - 1;
  if (key_hi >= len_k || q_hi >= len_q) return true;
  const int d0 = len_k - len_q;
  if constexpr (MASK == kMaskCausal) return key_hi > q_lo + d0;  // allowed: key <= query + d0
  if constexpr (MASK == kMaskWindow) {
    const bool right_ok = p.window_right < 0 || key_hi <= q_lo + d0 + p.window_right;
    const bool left_ok = p.window_left < 0 || key_lo >= q_hi + d0 - p.window_left;
    return !(right_ok && left_ok);
  }
  return false;
}

// Writes this warpgroup's dS^T (64 keys x 64 queries, packed pairs) as rows [row_base, +64) of a
// [BlockN][64] 128B-swizzled tile: one 128-byte row per key, so the dQ product can read dS (64
// queries x 128 keys) as an M-major A operand. Pair i = columns (2t, 2t+1) of 16-byte chunk i/2
// of row g (+8): the XOR with g spreads the 32 lanes over all 32 banks. STMATRIX
// (kBwdStmatrixDs): the same bytes by 4 stmatrix.x4 instead of 16 4-byte stores (epilogue.cuh
// store_pairs; row_base is a multiple of 8, so the swizzle of row_base + r is that of r). The
// 4-byte form stays a store through the generic pointer: routed through store_pairs' st.shared
// it gave the accumulator path's kernels (which use it) another integer schedule.
template <bool STMATRIX>
__device__ __forceinline__ void store_ds_t(const unsigned (&dsk)[16], unsigned char* tile, int row_base,
                                           const FragThread& f) {
  if constexpr (STMATRIX) {
    store_pairs<16, 64, true>(ptx::smem_addr(tile) + unsigned(row_base * kSw128RowBytes), f,
                              [&](int i) { return dsk[i]; });
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i)
      *reinterpret_cast<unsigned*>(tile + sw128_offset(row_base + pair_row(f, i), pair_col(f, i))) = dsk[i];
  }
}

// Which 64-column chunk of dQ consumer `cw` computes for step j: the two warpgroups alternate, so
// with D = 64 (one chunk) they take turns step by step, and with D = 128 each does one chunk per
// step. Returns -1 when the warpgroup has no dQ job this step.
template <int D>
__device__ __forceinline__ int bwd_dq_owner_chunk(int j, int cw) {
  const int c = (j + cw) & 1;
  return c < D / kBwdDqCols ? c : -1;
}

// The dQ job of step j reads both warpgroups' dS^T halves of step j: wait for its buffer's full phase.
// FENCE (kBwdDsFenceAtReader): the halves were published without a proxy fence; this thread's
// fence after the acquire orders both warpgroups' stores before its dQ wgmma's operand reads.
template <bool FENCE>
__device__ __forceinline__ void wait_ds_full(int j, BwdBarriers* bars) {
  ptx::mbarrier_wait(&bars->ds_full[j % kBwdDsStages], unsigned(j / kBwdDsStages) & 1u);
  if constexpr (FENCE) ptx::fence_proxy_async_smem();
}

// Before writing into step j's dS^T buffer: every dQ job that read its previous use is done (the
// "empty" phase of the use kBwdDsStages steps earlier; a fresh barrier passes, the producer idiom).
__device__ __forceinline__ void wait_ds_empty(int j, BwdBarriers* bars) {
  ptx::mbarrier_wait(&bars->ds_empty[j % kBwdDsStages], (unsigned(j / kBwdDsStages) & 1u) ^ 1u);
}

// dQ job of step j: dq (64 queries x 64 columns of chunk c) = dS (64 x 128 keys) K[:, chunk c].
// A = dS^T buffer read M-major (TRANS_A: queries contiguous), B = the resident K tile read N-major
// (TRANS_B: D contiguous), reduction over all 128 keys; the caller waited for the buffer
// (wait_ds_full).
template <int DTYPE, int D>
__device__ __forceinline__ void issue_dq(float (&dq)[32], int j, int chunk, unsigned ds_tiles, unsigned k_tile) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  const int buf = j % kBwdDsStages;
  const unsigned a_tile = ds_tiles + buf * plan.ds_bytes;
  const unsigned b_tile = k_tile + chunk * kBwdBlockN * kSw128RowBytes;  // panel `chunk` of K
  const WgmmaDescBase ad = sw128_mnmajor_base(a_tile, kBwdBlockN), bd = sw128_mnmajor_base(b_tile, kBwdBlockN);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBwdBlockN / 16; ++kk) {
    const unsigned long long a = ad.at(sw128_mnmajor_step(kk));
    const unsigned long long b = bd.at(sw128_mnmajor_step(kk));
    if (kk == 0)
      ptx::Wgmma<64, DTYPE>::template ss<0, 1, 1>(dq, a, b);
    else
      ptx::Wgmma<64, DTYPE>::template ss<1, 1, 1>(dq, a, b);
  }
  ptx::wgmma_commit();
}

// kBwdDqFinish: publishes the header of consumer cw's dQ job of step j (its slot in the ring of
// two) at the start of the step that stages the job, so that the writer can wait for the earlier
// contributors and load a last job's partial sum while the job is still being computed. The ring
// slot was freed by the writer's dq_empty arrival for job k - 2, which this warpgroup waited for
// before staging job k - 1, so no announcement can run a phase ahead of the writer.
template <int D, class HeaderFn>
__device__ __forceinline__ void bwd_dq_announce(int j, int cw, BwdBarriers* bars, HeaderFn header) {
  const int tid = int(threadIdx.x) - 128 * (cw + 1);
  if (tid == 0) {
    const unsigned k = unsigned(dq_job_index<D>(j));
    bars->dq_job[cw][k & 1] = header();
    ptx::mbarrier_arrive(&bars->dq_announce[cw][k & 1]);  // release: the header before the arrival
  }
}

// After the dQ job's wgmma completed (or at once, for a warpgroup without a job): give the dS
// buffer back, then hand the accumulator to the writer through this warpgroup's staging buffer
// (TWO, kBwdDqTwoStage: buffer k & 1 of its two, DqStage).
//   dq_empty phases: the writer arrives on a buffer's empty once after each job staged there; we
//   wait before reusing the buffer (job k waits for job k - 1's read, with TWO for job k - 2's) and
//   once at exit (bwd_consumer), on that earlier job's phase (DqStage::parity). A phase cannot be
//   skipped: our arrival on a buffer's full for job k needs the writer's empty arrival for the
//   buffer's previous job first, and the writer's arrival needs our full arrival for that job.
//   That wait also means every thread's reads of the buffer for the earlier job are done (they
//   arrived on dq_full after them), so the buffer may be rewritten without a warpgroup barrier.
// FINISH: the header was announced (bwd_dq_announce); the writer's dq_partial answer says the
// header was read and, for a last job with earlier contributors, their partial sum is in partial
// buffer cw. A last job is then finished here: dq + partial (the add the accumulator's bulk reduce
// would have done), times logit_scale * out_scale, rounded and staged as the 64 x 64 block of dQ
// rows, exactly as dq_convert would: the same bits. TMA (kBwdDqTmaStore) and whole rows: the
// writer stores the staged block by TMA; otherwise the threads copy its rows after a barrier.
// PAIR: no announcement; the header is computed here (rank 1 finishes every job, rank 0 sends
// every job). The rank-0 CTA's part arrives in the partial buffer on pair_full[cw] (one copy per
// job, so the k-th job waits parity k & 1), and once every thread has read it, rank 0's writer
// hears it on its pair_empty[cw].
// `trace` / `step`: kBwdTrace's recorder and the consumer's current step (for the events' key).
template <int DTYPE, int D, bool FINISH, bool PAIR, bool TMA, bool RED, bool STMATRIX, bool WRITER_FENCE,
          class HeaderFn, class Tracer>
__device__ __forceinline__ void bwd_dq_finish(float (&dq)[32], bool has_job, int j, int cw, DqStage stage,
                                              BwdBarriers* bars, unsigned char* smem, const GdpaParams& p,
                                              const FragThread& f, HeaderFn header, Tracer& trace, int step) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  __syncwarp();
  if (ptx::lane_id() == 0) ptx::mbarrier_arrive(&bars->ds_empty[j % kBwdDsStages]);
  if (!has_job) return;
  const unsigned k = unsigned(dq_job_index<D>(j));
  const int b = stage.buffer(k);
  // The writer must have read the job that used this buffer before (the previous one, or with
  // two buffers the one before it).
  if (k >= stage.depth()) ptx::mbarrier_wait(&bars->dq_empty[cw][b], stage.parity(k - stage.depth()));
  trace(kTrDqBufferFree, step);
  const int tid = int(threadIdx.x) - 128 * (cw + 1);
  const unsigned staging = ptx::smem_addr(smem) + dq_buffer_off<D>(cw, b);
  const int bar = kBwdBarEpilogueBase + cw;
  bool finished = false;
  if constexpr (FINISH) {
    DqJobHeader h;
    if constexpr (PAIR) {
      h = header();
    } else {
      ptx::mbarrier_wait(&bars->dq_partial[cw], k & 1u);
      // Thread 0 wrote the header; a warpgroup barrier orders that for the other threads directly
      // (the writer's answer orders it too, but through a third thread).
      ptx::named_barrier_sync(bar, 128);
      h = bars->dq_job[cw][k & 1];
    }
    if (h.flags & kDqJobLast) {
      if (h.flags & kDqJobPartial) {
        if (PAIR) ptx::mbarrier_wait_cluster(&bars->pair_full[cw], k & 1u);
        trace(kTrPartialIn, step);
        const unsigned partial = ptx::smem_addr(smem) + dq_buffer_off<D>(cw, kDqPartial);
#pragma unroll
        for (int q = 0; q < 8; ++q) {  // float4 [q][tid] = our registers 4q..4q+3 (dq_frag_index)
          const uint4 v = ptx::ld_shared_u128(partial + unsigned((q * 128 + tid) * 16));
          dq[4 * q] = __uint_as_float(v.x) + dq[4 * q];
          dq[4 * q + 1] = __uint_as_float(v.y) + dq[4 * q + 1];
          dq[4 * q + 2] = __uint_as_float(v.z) + dq[4 * q + 2];
          dq[4 * q + 3] = __uint_as_float(v.w) + dq[4 * q + 3];
        }
        // Our generic reads of the buffer before the TMA unit (async proxy) overwrites it for a
        // later job, once our dq_full arrival has reached the writer.
        ptx::fence_proxy_async_smem();
      }
      if constexpr (PAIR) {
        // Every thread has read the partner's part (and fenced the reads against the async proxy).
        ptx::named_barrier_sync(bar, 128);
        if (tid == 0) ptx::mbarrier_arrive_remote(ptx::map_shared_rank(ptx::smem_addr(&bars->pair_empty[cw]), 0u));
      }
      stage_block<DTYPE, kBwdDqCols, 64, STMATRIX>(dq, staging, p.logit_scale * p.out_scale, f);
      if (TMA && (h.flags & kDqJobTmaStore)) {
        if (!WRITER_FENCE) ptx::fence_proxy_async_smem();  // generic stores -> the writer's TMA store (async proxy)
      } else {
        ptx::named_barrier_sync(bar, 128);
        copy_staged_rows<kBwdDqCols>(staging, h.out, p.heads_q * D, h.rows, tid);
      }
      // Pairs computed the header here; the writer reads it (ordered by dq_full) for the TMA
      // store's coordinates, or to see that there is nothing to store.
      if (TMA && PAIR && tid == 0) bars->dq_job[cw][k & 1] = h;
      finished = true;
    }
  } else if constexpr (RED) {
    // Added here, from the registers (kBwdDqRed); the writer only answers the arrival below.
    float* dst = header().dst;
#pragma unroll
    for (int q = 0; q < 8; ++q)  // dq_frag_index: registers 4q..4q+3 at float4 [q][tid]
      ptx::red_add_v4_f32(dst + (q * 128 + tid) * 4, dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
    finished = true;
  } else {
    if (tid == 0) bars->dq_job[cw][k & 1] = header();  // ordered for the writer by the dq_full arrival below
  }
  if (!finished) {
    float4* dst = reinterpret_cast<float4*>(smem + dq_buffer_off<D>(cw, b));
#pragma unroll
    for (int q = 0; q < 8; ++q)  // dq_frag_index: registers 4q..4q+3 at float4 [q][tid]
      dst[q * 128 + tid] = make_float4(dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
    if (!WRITER_FENCE) ptx::fence_proxy_async_smem();  // generic stores -> the writer's bulk reduce (async proxy)
  }
  // Every thread arrives (not one per warp after __syncwarp): the partial-sum reads of each thread
  // are then ordered before the writer's next TMA load into that buffer by the thread's own
  // release, which is also the form compute-sanitizer's racecheck recognises.
  ptx::mbarrier_arrive(&bars->dq_full[cw][b]);
}

// Waits until the writer has read consumer cw's job `back` jobs before its next one (1: the last;
// `step` = steps done in the CTA's lifetime), if it had one, so that the buffer of that job may be
// rewritten; the writer reads in job order, so every earlier job has been read as well. The wait
// is for a phase the next job's own wait (bwd_dq_finish) targets as well (or, with two buffers and
// back = 2, the job after it), so waiting for it early is harmless.
template <int D>
__device__ __forceinline__ void bwd_wait_staging_idle(BwdBarriers* bars, int cw, int step, DqStage stage,
                                                      unsigned back = 1) {
  const unsigned next = unsigned(dq_jobs_before<D>(step, cw));
  if (next >= back) {
    const unsigned k = next - back;
    ptx::mbarrier_wait(&bars->dq_empty[cw][stage.buffer(k)], stage.parity(k));
  }
}

// ---------------------------------------------------------------------------------------------
// Consumer: one warpgroup (cw = 0 or 1), keys [n0 + 64 cw, + 64) of every work tile.
// ---------------------------------------------------------------------------------------------
//
// One step t (p = t % kBwdDsStages), in issue order:
//   1  wait Q/dO(t) full (K and V were waited for before the tile's first step)
//   2  S^T = K Q^T and dP^T = V dO^T, one commit group (kBwdPingpong: in this warpgroup's turn;
//      kBwdEarlyAct: two groups, and P^T and act' are computed between the two waits)
//   3  wait it
//   4  P^T and dS^T from the two accumulators (scores_to_p_ds), packed in registers; boundary
//      blocks then clear their disallowed entries (mask_p_ds)
//   5  dS exchange: wait ds_empty[p], store our dS^T half, fence.proxy.async, arrive ds_full[p]
//   6  dV += P^T dO, dK += dS^T Q (RS), commit   (dS^T was stored first: A registers of an
//      in-flight wgmma must not even be read)
//   7  dQ job: step t-1 (kBwdDeferDq, not at a tile's first step) or step t: wait ds_full, 8
//      wgmmas, commit   (kBwdPingpong: 6 and 7 in this warpgroup's next turn, ds_full waited
//      for before it)
//   8  wait all: release Q/dO(t); dq job: arrive ds_empty, stage for the writer
// kBwdDqFirst (D = 128; the host's default with the ordered finish only): 7 is issued before 6 as
// its own commit group, and after waiting for it alone (wait_group 1) the warpgroup gives the dS
// buffer back and hands the job over while 6 still runs; then it waits for 6.
// V is released at step 3 of the tile's last step (dP^T is its only reader); with kBwdDeferDq the
// tile then runs the dQ job of its last step; then K is released (kBwdDvInV: dV is staged in our
// rows of V at that job's start, and K and V go back before its hand-over), and dV, dK leave through the
// warpgroup's partial-sum or dQ staging buffer, or dK through its halves of the dS^T buffers
// (kBwdDkInDs; the epilogue below says which).
//
// dS exchange protocol: buffer p is reused every kBwdDsStages steps. Its "empty" phase for use u
// completes when all 8 consumer warps have arrived after use u's dQ job (a warpgroup without a job
// arrives at once), so before writing use u + kBwdDsStages a warpgroup waits parity
// ((t / S) & 1) ^ 1 (a fresh barrier passes: the producer idiom). "Full" for use u completes when
// both warpgroups stored their halves; a dQ job of step j waits parity (j / S) & 1. No barrier can
// run two phases ahead of a waiter, since each phase needs that waiter's own arrivals.
template <int DTYPE, int D, int ACT, int MASK, int FLAGS>
__device__ __forceinline__ void bwd_consumer(int cw, const GdpaParams& p, const ptx::TensorMap* tm_dk,
                                             const ptx::TensorMap* tm_dv, unsigned char* smem) {
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  constexpr bool kDefer = (FLAGS & kBwdDeferDq) != 0;
  constexpr bool kUnitScale = (FLAGS & kBwdUnitLogitScale) != 0;  // the host checked logit_scale == 1
  // P^T = round(2 f), dV halved in the epilogue (activations.cuh act_twice_f: why that is exact).
  constexpr bool kTwice = (FLAGS & kBwdHalfFold) != 0 && use_twice_f<DTYPE, ACT, act_mix_of(FLAGS)>;
  constexpr bool kFinish = (FLAGS & kBwdDqFinish) != 0;
  constexpr bool kPingpong = (FLAGS & kBwdPingpong) != 0;
  constexpr bool kPair = (FLAGS & kBwdPair) != 0;
  constexpr bool kRecords = (FLAGS & kBwdTileRecords) != 0;
  constexpr bool kTmaStore = (FLAGS & kBwdDqTmaStore) != 0;
  // D = 64: a warpgroup has a dQ job every other step, a run-time branch around its issue, and
  // ahead of dV and dK that makes ptxas insert a warpgroup.arrive: kept after them there.
  constexpr bool kDqFirst = (FLAGS & kBwdDqFirst) != 0 && D == 128;
  constexpr bool kTwo = bwd_dq_two_stage(FLAGS);
  constexpr bool kRed = bwd_dq_red(FLAGS);
  constexpr bool kEarlyAct = (FLAGS & kBwdEarlyAct) != 0 && bwd_early_act_fits(D, ACT);
  // dK staged in our halves of the dS^T buffers: one 64-column panel per buffer.
  constexpr bool kDkInDs = (FLAGS & kBwdDkInDs) != 0 && kTwo && D / 64 <= kBwdDsStages;
  constexpr bool kPairDvInDs = kPair && (FLAGS & kBwdPairDvInDs) != 0 && D / 64 <= kBwdDsStages;
  constexpr bool kDvInV = bwd_dv_in_v(FLAGS) && kDkInDs;  // dV staged in our rows of V; V released after
  constexpr bool kStmatrix = (FLAGS & kBwdStmatrix) != 0;
  constexpr bool kStmatrixDs = (FLAGS & kBwdStmatrixDs) != 0;
  constexpr bool kSkipEmptyHalf = (FLAGS & kBwdSkipEmptyHalf) != 0;
  constexpr bool kDsFenceAtReader = (FLAGS & kBwdDsFenceAtReader) != 0;
  constexpr bool kWriterFence = (FLAGS & kBwdDqFenceAtWriter) != 0;
  const DqStage dq_stage = dq_stage_of<kTwo, kPair && (FLAGS & kBwdPairTwoStage) != 0>();
  auto* bars = reinterpret_cast<BwdBarriers*>(smem + plan.bar_off);
  BwdTracer<(FLAGS & kBwdTrace) != 0> trace(p, cw, int(threadIdx.x) == 128 * (cw + 1));
  const unsigned base = ptx::smem_addr(smem);
  const unsigned k_tile = base + plan.k_off, v_tile = base + plan.v_off, ds_tiles = base + plan.ds_off;
  const FragThread f = frag_thread(int(threadIdx.x) - 128 * (cw + 1));
  const long long k_stride = (long long)p.heads_kv * D;  // elements between consecutive key rows

  PipeCounter<1> kvc;
  // CTA-lifetime step counter: dS buffer, dQ owner (the writer keeps the same count) and Q/dO ring
  // position (one slot per step, so the producer's ring counter equals it too).
  int step = 0;
  float dv[D / 2], dk[D / 2];  // live for a whole work tile
  BwdTurns<FLAGS>::start(cw);

  const BwdWalk<kPair> walk;
  for (int it = walk.first; it < p.num_tiles; it += walk.stride) {
    // Row 0 of this warpgroup's 64 keys in dK / dV.
    auto out_rows = [&](void* grad, int k_row, int kv_head) {
      return static_cast<unsigned short*>(grad) + (long long)(k_row + 64 * cw) * k_stride + (long long)kv_head * D;
    };
    BwdTileScalars ts;
    {
      // Each field through a lane-0 shuffle, so that ptxas knows it is warp-uniform.
      const BwdTile r = bwd_tile<MASK, kPair, kRecords>(p, it);
      auto uniform = [](int v) { return __shfl_sync(0xffffffffu, v, 0); };
      const BwdTile t{{uniform(r.batch), uniform(r.kv_head), uniform(r.n0), uniform(r.k_row), uniform(r.q_seq_row),
                       uniform(r.len_q), uniform(r.len_k), uniform(r.m_begin), uniform(r.m_end), uniform(r.steps)}};
      if (t.empty()) {  // Lq = 0 or no query sees these keys: zero gradients (rows past Lk: not ours)
        store_zero_rows<D>(out_rows(p.dk, t.k_row, t.kv_head), k_stride, t.len_k - t.n0 - 64 * cw, f);
        store_zero_rows<D>(out_rows(p.dv, t.k_row, t.kv_head), k_stride, t.len_k - t.n0 - 64 * cw, f);
        continue;
      }
      ts = BwdTileScalars{t, dq_slot_begin(t.q_seq_row, t.batch)};
    }
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dv[i] = dk[i] = 0.0f;
    // Pins the zeros before the first wgmma.fence of the tile: a move defining a wgmma input after
    // the fence would make ptxas serialize every wgmma of the kernel.
    ptx::fence_operand(dv);
    ptx::fence_operand(dk);

    // The header of the dQ job of step `js` of this tile, column chunk `chunk` (bwd_config.h
    // for the block layout and the semaphores; the deterministic protocol in bwd_dq_writer).
    auto job_header = [&](const BwdStep& js, int chunk) {
      const long long block = dq_block_index(ts.slot0 + js.m, js.head, p.heads_q);
      DqJobHeader h;
      // Pairs use neither the accumulator nor the semaphores (and computing them anyway keeps two
      // 64-bit addresses live in the hand-over).
      h.dst = kPair ? nullptr : p.dq_accum + dq_chunk_offset(block, chunk, D);
      h.sem = kPair ? nullptr : p.semaphores + block;
      h.out = nullptr;
      h.expected = 0;
      h.flags = 0;
      h.rows = 0;
      h.pad = 0;
      const int r0 = js.m * kBwdBlockM;
      auto finish_here = [&] {
        const int row = ts.q_seq_row + r0, col = js.head * D + chunk * kBwdDqCols;
        h.rows = min(kBwdBlockM, ts.len_q - r0);
        if (kTmaStore && h.rows == kBwdBlockM) {  // whole rows: a box never clips
          h.flags |= kDqJobTmaStore;
          h.box = DqTmaBox{col, row};
        } else {
          h.out = static_cast<unsigned short*>(p.dq) + (long long)row * (p.heads_q * D) + col;
        }
      };
      if (kPair) {  // rank 1 finishes every block with rank 0's part; rank 0 only sends
        if (ptx::cluster_ctarank() == 1) {
          h.flags = kDqJobLast | kDqJobPartial;
          finish_here();
        }
      } else if (p.deterministic) {
        // KV tiles [first / BlockN, (last - 1) / BlockN] see query tile m (mask_key_range is exact
        // for a rectangle: the same relation bwd_tile uses the other way round), so n - first /
        // BlockN tiles of the group add before ours, in increasing KV order.
        int first, last;
        const int len_q = ts.len_q;
        mask_key_range(MASK, r0, min(r0 + kBwdBlockM, len_q), len_q, ts.len_k, p.window_left, p.window_right, &first,
                       &last);
        h.expected = ts.n0 / kBwdBlockN - first / kBwdBlockN;
        if (kFinish && ts.n0 / kBwdBlockN == (last - 1) / kBwdBlockN) {  // nobody adds after us
          h.flags = kDqJobLast | (h.expected > 0 ? kDqJobPartial : 0);
          finish_here();
        }
      }
      return h;
    };

    // One step; HAS_DQ = false only for the first step of a tile in the deferred mode (no earlier
    // step to finish). Two straight-line instantiations instead of a branch around the dQ issue:
    // with a wgmma group in flight across that branch ptxas serializes every wgmma and spills.
    int ls = 0;
    // The (head, query tile) of step ls or, `previous`, of step ls - 1 (the deferred dQ job's).
    // Walked one step at a time (bwd_next_step) as one loop-carried pair, `job`: the step whose dQ
    // job this step stages (kBwdDeferDq: step ls - 1, from ls = 1 on; otherwise step ls). Except
    // with the ordered finish, where the walk made ptxas spill 32-40 bytes at D = 128: that path
    // still divides.
    constexpr bool kWalk = !(kFinish && !kPair);
    BwdStep job{ts.kv_head * p.group, ts.m_begin};
    auto step_of = [&](bool previous) {
      if constexpr (!kWalk)
        return bwd_step(ts.m_begin, ts.m_end, ts.kv_head, p.group, previous ? ls - 1 : ls);
      else if constexpr (kDefer)
        return previous || ls == 0 ? job : bwd_next_step(job, ts.m_begin, ts.m_end);
      else
        return job;  // `previous` is asked for only with kBwdDeferDq
    };
    // IDLE (kBwdSkipEmptyHalf): all of this warpgroup's keys lie past the sequence's end; the
    // step keeps every wait, arrival and turn but issues only the dQ job.
    auto step_body = [&](auto has_dq, auto idle_half) {
      constexpr bool kHasDq = decltype(has_dq)::value;
      constexpr bool kIdle = decltype(idle_half)::value;
      const int query0 = step_of(false).m * kBwdBlockM;
      const int qs = step % kBwdQStages;
      const unsigned q_tile = base + plan.q_off + qs * plan.q_bytes;
      const unsigned do_tile = base + plan.do_off + qs * plan.q_bytes;
      // Declared per step on purpose: the first wgmma of each product passes its accumulator as
      // "+f" although scale-d = 0 ignores it; a fresh (undefined) array keeps the compiler from
      // carrying the previous step's values, which would hold 96 more registers for nothing.
      // The dQ job reuses s_acc (dead once dS^T is formed): ptxas gives every wgmma accumulator
      // array its own aligned register block, so a separate array would cost 32 registers.
      float s_acc[32], dp_acc[32];
      unsigned pk[16], dsk[16];
      float(&dq)[32] = s_acc;
      const int dq_step = kDefer ? step - 1 : step;
      const int chunk = bwd_dq_owner_chunk<D>(dq_step, cw);
      // kBwdDqFinish: the writer learns of this step's dQ job now, a GEMM phase before it is staged
      // (pairs need no announcement: the rank says what each job is, bwd_dq_finish). Announced
      // after the S^T / dP^T issue instead, where the header's division would have run under the
      // GEMMs, it measured 0.98-0.99x at s = 0.5 L = 256 (the writer's early start matters more);
      // a step ahead, under the previous step's products, 0.94-0.98x (PERF_NOTES, twenty-fourth
      // session).
      if (kFinish && !kPair && kHasDq && chunk >= 0)
        bwd_dq_announce<D>(dq_step, cw, bars, [&] { return job_header(step_of(kDefer), chunk); });

      // 1-2: the two transposed score products, one commit group.
      consumer_wait(bars->qdo[qs], unsigned(step / kBwdQStages) & 1u);
      trace(kTrQdoReady, step);
      BwdTurns<FLAGS>::wait(cw);
      trace(kTrTurnA, step);
      if constexpr (!kIdle) {
        ptx::wgmma_fence();
        issue_keys_x_tile<DTYPE, D>(s_acc, k_tile, 64 * cw, q_tile);
        if (kEarlyAct) ptx::wgmma_commit();
        issue_keys_x_tile<DTYPE, D>(dp_acc, v_tile, 64 * cw, do_tile);
        ptx::wgmma_commit();
      }
      BwdTurns<FLAGS>::pass(cw);

      // 3-4: P^T and dS^T (kEarlyAct: P^T and act' while dP^T still runs).
      if constexpr (kIdle) {
        if (!kDvInV && ls == ts.steps - 1) consumer_release(bars->v);  // as below: the last dP^T is done
      } else {
        ptx::wgmma_wait<kEarlyAct ? 1 : 0>();
        ptx::fence_operand(s_acc);
        trace(kTrADone, step);
        if (kEarlyAct) {
          scores_to_p_dact<DTYPE, ACT, kUnitScale, act_mix_of(FLAGS), kTwice>(s_acc, pk, p.logit_scale);
          ptx::wgmma_wait<0>();
        }
        ptx::fence_operand(dp_acc);
        // dP^T is V's only reader: after the tile's last one, the producer may load the next tile's
        // V while this tile's last dV / dK / dQ products and its epilogue still run (kDvInV: in
        // the tail, once dV's store has read our rows of it).
        if (!kDvInV && ls == ts.steps - 1) consumer_release(bars->v);
        if (kEarlyAct)
          dact_to_ds<DTYPE>(s_acc, dp_acc, dsk);
        else
          scores_to_p_ds<DTYPE, ACT, kUnitScale, act_mix_of(FLAGS), kTwice>(s_acc, dp_acc, pk, dsk, p.logit_scale);
        {
          const int key0 = ts.n0 + 64 * cw, len_q = ts.len_q, len_k = ts.len_k;
          if (bwd_block_needs_mask<MASK>(key0, query0, len_q, len_k, p))
            mask_p_ds<MASK>(pk, dsk, f, key0, query0, MaskBounds{len_q, len_k, p.window_left, p.window_right});
        }
      }
      trace(kTrActComputed, step);

      // 5: publish our half of dS^T(step) (IDLE: zeros, into each buffer once per tile).
      {
        const int buf = step % kBwdDsStages;
        wait_ds_empty(step, bars);
        if constexpr (kIdle) {
          if (ls < kBwdDsStages) {
            const unsigned zeros[16] = {};
            store_ds_t<kStmatrixDs>(zeros, smem + plan.ds_off + buf * plan.ds_bytes, 64 * cw, f);
          }
        } else {
          store_ds_t<kStmatrixDs>(dsk, smem + plan.ds_off + buf * plan.ds_bytes, 64 * cw, f);
        }
        if (!kDsFenceAtReader) ptx::fence_proxy_async_smem();  // generic stores -> the dQ wgmma (async proxy)
        __syncwarp();
        if (ptx::lane_id() == 0) ptx::mbarrier_arrive(&bars->ds_full[buf]);
      }
      trace(kTrDsPublished, step);

      // 6-7: dV and dK, then the dQ job (which needs both warpgroups' dS^T halves). Without turns
      // dV and dK go first and run while the job waits for its buffer; with turns the buffer is
      // waited for before the turn is taken, so a turn is never held across that wait. kDqFirst:
      // the job first, so that its hand-over can run under dV and dK.
      const bool dq_job = kHasDq && chunk >= 0;
      if (kPingpong && dq_job) wait_ds_full<kDsFenceAtReader>(dq_step, bars);
      BwdTurns<FLAGS>::wait(cw);
      trace(kTrTurnB, step);
      auto dq_issue = [&] {
        if (dq_job) {
          if (!kPingpong) wait_ds_full<kDsFenceAtReader>(dq_step, bars);
          issue_dq<DTYPE, D>(dq, dq_step, chunk, ds_tiles, k_tile);
        } else if (!kDqFirst) {
          ptx::wgmma_commit();  // an empty group, so that wait_group 1 below always means dV and dK
        }
      };
      auto dq_hand_over = [&] {
        if (kHasDq)
          bwd_dq_finish<DTYPE, D, kFinish, kPair, kTmaStore, kRed, kStmatrix, kWriterFence>(
              dq, chunk >= 0, dq_step, cw, dq_stage, bars, smem, p, f,
              [&] { return job_header(step_of(kDefer), chunk); }, trace, step);
        trace(kTrDqHanded, step);
      };
      ptx::wgmma_fence();
      if (kDqFirst) dq_issue();
      if constexpr (!kIdle) {
        issue_acc_rs<DTYPE, D>(dv, pk, do_tile);
        issue_acc_rs<DTYPE, D>(dk, dsk, q_tile);
      }
      ptx::wgmma_commit();  // IDLE: an empty group, so that the waits below count the same groups
      if (!kDqFirst) dq_issue();
      BwdTurns<FLAGS>::pass(cw);

      // 8: everything of this step has finished reading Q, dO, P^T, dS^T and the dS buffer.
      // kDqFirst: the dQ job's group first (dV and dK still run): its hand-over, then the rest.
      // Otherwise dV and dK (the last readers of Q and dO) are the older group: Q and dO go back to
      // the producer while the dQ job still runs. With two Q / dO stages the slot of step t + 2
      // frees when the second warpgroup is done with step t, about half a step before the first
      // one needs it; the earlier release gives the load the dQ job's time more. Measured 1.01-
      // 1.035x on the self s = 1 sets, though the trace saw a step only 0.7 % shorter (PERF_NOTES,
      // backward v12): the gain is real, this reason for it is not confirmed.
      if constexpr (kDqFirst) {
        ptx::wgmma_wait<1>();
        ptx::fence_operand(dq);
        trace(kTrDqJobDone, step);
        dq_hand_over();
      } else {
        ptx::wgmma_wait<1>();
        if constexpr (!kIdle) {
          ptx::fence_operand(pk);
          ptx::fence_operand(dsk);
        }
        ptx::fence_operand(dv);
        ptx::fence_operand(dk);
        consumer_release(bars->qdo[qs]);
      }
      ptx::wgmma_wait<0>();
      if constexpr (!kIdle) {
        ptx::fence_operand(pk);
        ptx::fence_operand(dsk);
      }
      ptx::fence_operand(dv);
      ptx::fence_operand(dk);
      ptx::fence_operand(dq);
      trace(kTrBDone, step);
      if (kDqFirst) consumer_release(bars->qdo[qs]);
      if (!kDqFirst) dq_hand_over();
    };
    // K and V of the tile (the first step needs both at once; the producer loads them right after
    // that step's Q and dO).
    trace(kTrTileRead, step);
    consumer_wait(bars->k, kvc.phase());
    trace(kTrKIn, step);
    consumer_wait(bars->v, kvc.phase());
    trace(kTrVIn, step);
    if constexpr (kTwo) {
      // The previous tile's epilogue staged dK in the buffer that our next dQ job uses: its TMA
      // store's issuer waits until the store has read it, then everyone (it did long ago: the
      // K / V wait above was longer).
      if (int(threadIdx.x) == 128 * (cw + 1)) ptx::bulk_wait_group_read<0>();
      ptx::named_barrier_sync(kBwdBarEpilogueBase + cw, 128);
    }
    trace(kTrTileStart, step);
    auto run_steps = [&](auto idle_half) {
      for (; ls < ts.steps; ++ls, ++step) {
        if (kDefer && ls == 0)
          step_body(BoolConstant<false>{}, idle_half);
        else
          step_body(BoolConstant<true>{}, idle_half);
        if (kWalk && (!kDefer || ls > 0)) job = bwd_next_step(job, ts.m_begin, ts.m_end);
      }
    };
    if (kSkipEmptyHalf && 64 * cw >= ts.len_k - ts.n0)
      run_steps(BoolConstant<kSkipEmptyHalf>{});
    else
      run_steps(BoolConstant<false>{});

    // Rows and head from the tile's start (no global reads here, in series with the stores).
    const int rows_valid = ts.len_k - ts.n0 - 64 * cw, k_row = ts.k_row, kv_head = ts.kv_head;
    const int tid = ptx::thread_x_fresh() - 128 * (cw + 1), bar = kBwdBarEpilogueBase + cw;
    const float dv_scale = (kTwice ? 0.5f : 1.0f) * p.out_scale;
    // kDvInV: dV leaves from our 64 rows of each V panel (a panel stride of kBwdBlockN rows), which
    // only our own dP^T products read, the last one long done. Staged before the tail's wait for
    // the other warpgroup's last dS^T (the leading warpgroup waits there anyway), so that the
    // store's read runs under that wait and the dQ product, and V goes back about when K does.
    auto store_dv_in_v = [&] {
      store_block_tma<DTYPE, D, kBwdBlockN, kStmatrix>(dv, v_tile + 64 * cw * kSw128RowBytes, tm_dv, kv_head,
                                                       k_row + 64 * cw, out_rows(p.dv, k_row, kv_head), int(k_stride),
                                                       rows_valid, dv_scale, f, tid, bar, false);
    };
    auto release_k_and_v = [&] {
      consumer_release(bars->k);
      // V once dV's reads are done: the TMA store's (this thread's only bulk group), or, for a
      // block holding the sequence's last rows, each warp's own row copies.
      if (rows_valid >= 64) {
        if (tid == 0) {
          ptx::bulk_wait_group_read<0>();
          ptx::mbarrier_arrive_count(&bars->v.empty, 4);  // for the warpgroup's four warps
        }
      } else {
        __syncwarp();
        consumer_release(bars->v);
      }
    };
    if constexpr (kDefer) {  // the last step's dQ job, while K is still resident
      float dq[32];
      const int chunk = bwd_dq_owner_chunk<D>(step - 1, cw);
      if (chunk >= 0) {
        if (kFinish && !kPair)
          bwd_dq_announce<D>(step - 1, cw, bars, [&] { return job_header(step_of(true), chunk); });
        if constexpr (kDvInV) store_dv_in_v();
        wait_ds_full<kDsFenceAtReader>(step - 1, bars);
        issue_dq<DTYPE, D>(dq, step - 1, chunk, ds_tiles, k_tile);
        ptx::wgmma_wait<0>();
        ptx::fence_operand(dq);
      } else if constexpr (kDvInV) {
        store_dv_in_v();
      }
      // kDvInV: K and V go back before the hand-over (which may wait for the writer): the dQ
      // product was K's last reader, and V's rows have been read by dV's store or its row copies.
      if constexpr (kDvInV) release_k_and_v();
      bwd_dq_finish<DTYPE, D, kFinish, kPair, kTmaStore, kRed, kStmatrix, kWriterFence>(
          dq, chunk >= 0, step - 1, cw, dq_stage, bars, smem, p, f, [&] { return job_header(step_of(true), chunk); },
          trace, step - 1);
      trace(kTrLastDqHanded, step - 1);
    }
    // every dQ job of the tile has read K: the next tile may load (kDvInV: released above)
    if constexpr (!kDvInV) consumer_release(bars->k);
    kvc.advance();

    // Epilogue: the scales folded out of P and dS, io dtype, key rows inside the sequence only.
    // dV and dK leave through shared memory and the TMA unit (epilogue.cuh). dV goes through our
    // partial-sum buffer wherever that is free at a tile's end ("spare"), so it is staged and
    // stored while the writer may still hold the staging buffer with our last dQ job. The
    // partial buffer is free then: without kBwdDqFinish nothing uses it; with it, the next partial
    // sum is loaded into it only after our next announcement, which follows the final wait below;
    // in a pair, rank 0 receives nothing. Rank 1's receives the partner's next part as soon as it
    // has read this tile's last one, so rank 1 uses the staging buffer for both, after the writer.
    // Rank 0 with kBwdPairTwoStage stages its jobs in both buffers; with kBwdPairDvInDs (its
    // default) its dV then goes to our halves of the dS^T buffers, which wait only for this CTA's
    // last dQ jobs, and dK alone to the next job's buffer (1.02-1.07x on the pair sets); without it
    // both follow the accumulator path's order through the next job's buffer, whose previous job
    // rank 1 must have read first.
    // dK: on the two-stage accumulator path with kBwdDkInDs (the default there) it goes to our
    // halves of the dS^T buffers, staged right after dV (1.03x at self L = 512). Otherwise,
    // without kBwdDqFinish, it follows dV through the same buffer once dV's store has read it
    // (store_block_tma waits for that): the writer's last bulk add took 2.4k cycles of a 5.4k
    // epilogue (trace) and dV's store reads sooner, 1.04x at self L = 512 (ab-epi-dk-*). With the
    // finish, dK waits for the writer and takes the staging buffer: the writer's last job is tied
    // to another CTA's progress there (the partner, the earlier contributors), so that wait is not
    // saved, only moved, and adding dV's store to it measured 0.95-0.97x (and the dS^T buffers
    // instead 0.965-1.00x).
    // Two staging buffers: the one our next dQ job will use, whose previous job the writer has read
    // long ago (the tile's last job is in the other one); the next tile's start waits for these
    // stores (kTwo), or the end of this epilogue does (kBwdDqFinish, rank 0 of a pair).
    const bool spare = !kPair || ptx::cluster_ctarank() == 0;
    const unsigned stage = base + dq_buffer_off<D>(cw, kDqStaging);
    const int dv_buffer = dq_stage.two ? dq_stage.buffer(unsigned(dq_jobs_before<D>(step, cw)))
                                       : spare ? kDqPartial : kDqStaging;
    const unsigned dv_stage = base + dq_buffer_off<D>(cw, dv_buffer);
    // dK through dV's buffer (with the finish and two staging buffers, the other one holds the
    // tile's last job, which rank 1 may not have read yet).
    const bool dk_after_dv = !kFinish || !spare || dq_stage.two;
    // One 64 x D block (dV or dK) through shared memory and the TMA unit (store_block_tma).
    const float dk_scale = p.logit_scale * p.out_scale;
    auto store_out = [&](const float(&acc)[D / 2], unsigned at, const ptx::TensorMap* map, void* grad, float scale,
                         bool wait_for_stores) {
      store_block_tma<DTYPE, D, 64, kStmatrix>(acc, at, map, kv_head, k_row + 64 * cw, out_rows(grad, k_row, kv_head),
                                               int(k_stride), rows_valid, scale, f, tid, bar, wait_for_stores);
    };
    // The same block into our 64 key rows of both dS^T buffers, free once both warpgroups' dQ jobs
    // of the tile's last two steps have read them: the waits the next two steps' dS^T stores would
    // make. Panel c goes to buffer c (a panel stride of kBwdBlockN rows). The next store into them
    // waits for these reads: the next tile's start (kTwo) or the end of this epilogue (kFinish).
    auto store_out_in_ds = [&](const float(&acc)[D / 2], const ptx::TensorMap* map, void* grad, float scale) {
      for (int t = step; t < step + kBwdDsStages; ++t) wait_ds_empty(t, bars);
      store_block_tma<DTYPE, D, kBwdBlockN, kStmatrix>(acc, ds_tiles + 64 * cw * kSw128RowBytes, map, kv_head,
                                                       k_row + 64 * cw, out_rows(grad, k_row, kv_head), int(k_stride),
                                                       rows_valid, scale, f, tid, bar, false);
    };
    // kBwdPairDvInDs, rank 0 of a pair with two staging buffers: dV goes to our halves of the dS^T
    // buffers (waiting only for this CTA's last dQ jobs), dK alone to the next job's buffer.
    const bool dv_in_ds = kPairDvInDs && dq_stage.two;
    if (kDvInV) {
      // dV has left during the tail (store_dv_in_v above).
    } else if (dv_in_ds) {
      store_out_in_ds(dv, tm_dv, p.dv, dv_scale);
    } else {
      if (dq_stage.two) bwd_wait_staging_idle<D>(bars, cw, step, dq_stage, 2);
      if (!spare) bwd_wait_staging_idle<D>(bars, cw, step, dq_stage);
      store_out(dv, dv_stage, tm_dv, p.dv, dv_scale, true);
    }
    trace(kTrDvOut, step - 1);
    if (dv_in_ds) {
      bwd_wait_staging_idle<D>(bars, cw, step, dq_stage, 2);
      store_out(dk, dv_stage, tm_dk, p.dk, dk_scale, false);
    } else if constexpr (kDkInDs) {  // the accumulator path: dK in the dS^T buffers, right after dV
      store_out_in_ds(dk, tm_dk, p.dk, dk_scale);
    } else {
      if (!dk_after_dv) bwd_wait_staging_idle<D>(bars, cw, step, dq_stage);
      store_out(dk, dk_after_dv ? dv_stage : stage, tm_dk, p.dk, dk_scale, dk_after_dv);
    }
    // All reads of the staged dV and dK (threads' or the TMA unit's) done before a dQ job or a
    // partial sum overwrites them. Without kBwdDqFinish both went through the spare buffer, which
    // nothing but the next tile's epilogue writes, and that waits for these reads first
    // (store_block_tma): no wait here (the CTA's exit waits for the stores).
    if constexpr (kFinish) {
      if (tid == 0) ptx::bulk_wait_group_read<0>();
      ptx::named_barrier_sync(bar, 128);
    }
    trace(kTrEpilogueEnd, step - 1);
  }
  // Pairs the writer's dq_empty arrival after our last job; it also keeps the staging buffer (and
  // the CTA's shared memory) alive until that job's bulk reduce has read it.
  bwd_wait_staging_idle<D>(bars, cw, step, dq_stage);
  // The last dK / dV TMA stores must be complete before the CTA goes away.
  if (threadIdx.x == 128 * (cw + 1)) ptx::bulk_wait_group<0>();
}

// ---------------------------------------------------------------------------------------------
// The kernel: barrier set-up, then one branch per role.
// ---------------------------------------------------------------------------------------------
template <int DTYPE, int D, int ACT, int MASK, int FLAGS>
__global__ void __launch_bounds__(kBwdThreads, 1)
    gdpa_bwd(const __grid_constant__ ptx::TensorMap tm_q, const __grid_constant__ ptx::TensorMap tm_k,
             const __grid_constant__ ptx::TensorMap tm_v, const __grid_constant__ ptx::TensorMap tm_do,
             const __grid_constant__ ptx::TensorMap tm_dk, const __grid_constant__ ptx::TensorMap tm_dv,
             const __grid_constant__ ptx::TensorMap tm_dq, const __grid_constant__ GdpaParams p) {
  static_assert(D == 64 || D == 128, "head dim");
  static_assert(DTYPE == kBF16 || DTYPE == kFP16, "16-bit io dtypes only");
  static_assert((kBwdAllFlags & kActMixMask) == 0, "the activation mix has bits 8..12 of FLAGS");
  static_assert(kBwdConsumerWarpgroups == 2, "the dQ chunk alternation assumes two consumers");
  static_assert(!(FLAGS & kBwdPair) || ((FLAGS & kBwdDqFinish) && MASK == kMaskNone),
                "kBwdPair: the dQ finish, the same steps in both KV tiles");
  constexpr BwdSmemPlan plan = bwd_smem_plan(D);
  static_assert(plan.k_off % 1024 == 0 && plan.v_off % 1024 == 0 && plan.q_off % 1024 == 0 &&
                    plan.do_off % 1024 == 0 && plan.ds_off % 1024 == 0 && plan.q_bytes % 1024 == 0 &&
                    plan.ds_bytes % 1024 == 0,
                "128B-swizzled tiles must start on 1024-byte boundaries");
  static_assert(plan.dq_off % 16 == 0 && plan.partial_off % 16 == 0 && kBwdDqJobBytes % 16 == 0,
                "bulk copies need 16-byte alignment");
  static_assert(plan.dq_off % 1024 == 0 && kBwdDqJobBytes % 1024 == 0 && 64 * D * 2 <= kBwdDqJobBytes,
                "the staging buffers hold a 64 x D block of 128B-swizzled panels for the dK / dV TMA stores");
  static_assert(plan.bar_off % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(sizeof(BwdBarriers) <= size_t(plan.total - plan.bar_off), "barrier block fits the plan");

  extern __shared__ unsigned char smem_raw[];
  const unsigned raw = ptx::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + ((1024u - (raw & 1023u)) & 1023u);
  auto* bars = reinterpret_cast<BwdBarriers*>(smem + plan.bar_off);

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bars->k.full, 1);
    ptx::mbarrier_init(&bars->k.empty, kBwdConsumerWarps);
    ptx::mbarrier_init(&bars->v.full, 1);
    ptx::mbarrier_init(&bars->v.empty, kBwdConsumerWarps);
    for (int s = 0; s < kBwdQStages; ++s) {
      ptx::mbarrier_init(&bars->qdo[s].full, 1);
      ptx::mbarrier_init(&bars->qdo[s].empty, kBwdConsumerWarps);
    }
    for (int s = 0; s < kBwdDsStages; ++s) {
      ptx::mbarrier_init(&bars->ds_full[s], kBwdConsumerWarps);
      ptx::mbarrier_init(&bars->ds_empty[s], kBwdConsumerWarps);
    }
    for (int c = 0; c < kBwdConsumerWarpgroups; ++c) {
      for (int b = 0; b < 2; ++b) {
        ptx::mbarrier_init(&bars->dq_full[c][b], 128);  // every thread of the consumer warpgroup
        ptx::mbarrier_init(&bars->dq_empty[c][b], 1);   // the writer's leader lane
      }
      ptx::mbarrier_init(&bars->dq_announce[c][0], 1);  // the consumer's thread 0
      ptx::mbarrier_init(&bars->dq_announce[c][1], 1);
      ptx::mbarrier_init(&bars->dq_partial[c], 1);  // the writer's leader lane (+ the TMA bytes)
      if constexpr ((FLAGS & kBwdPair) != 0) {
        ptx::mbarrier_init(&bars->pair_full[c], 1);   // the partner's writer (+ its copy's bytes)
        ptx::mbarrier_init(&bars->pair_empty[c], 1);  // thread 0 of the partner's consumer c
      }
    }
    ptx::fence_mbarrier_init();
  }
  // kBwdPair: the partner CTA arrives on our barriers and copies into our shared memory, so its
  // first such access must come after our inits: a cluster-wide barrier instead of the CTA's.
  if constexpr ((FLAGS & kBwdPair) != 0)
    ptx::cluster_sync_all();
  else
    __syncthreads();

  // kBwdDqFollow: the follower may be placed once every CTA of this grid holds its SM.
  if constexpr ((FLAGS & kBwdDqFollow) != 0)
    if (threadIdx.x == 0) ptx::griddepcontrol_launch_dependents();
  const int wg = ptx::warpgroup_id();
  if (wg == 0) {
    ptx::setmaxnreg_dec<kBwdProducerRegs>();
    const int warp = ptx::warp_id();
    if (warp == 0) {
      if (ptx::elect_one()) {
        ptx::prefetch_tensormap(&tm_q);
        ptx::prefetch_tensormap(&tm_k);
        ptx::prefetch_tensormap(&tm_v);
        ptx::prefetch_tensormap(&tm_do);
        ptx::prefetch_tensormap(&tm_dk);
        ptx::prefetch_tensormap(&tm_dv);
        if constexpr ((FLAGS & kBwdDqFinish) && (FLAGS & kBwdDqTmaStore)) ptx::prefetch_tensormap(&tm_dq);
        bwd_producer<D, MASK, (FLAGS & kBwdPair) != 0, (FLAGS & kBwdTrace) != 0, (FLAGS & kBwdTileRecords) != 0,
                     bwd_dv_in_v(FLAGS)>(
            p, &tm_q, &tm_k, &tm_v, &tm_do, smem);
      }
    } else if (warp == 1) {
      constexpr bool kFinish = (FLAGS & kBwdDqFinish) != 0;
      constexpr bool kTma = kFinish && (FLAGS & kBwdDqTmaStore) != 0;
      constexpr bool kPairTwo = (FLAGS & kBwdPair) && (FLAGS & kBwdPairTwoStage);
      constexpr bool kFence = (FLAGS & kBwdDqFenceAtWriter) != 0;
      bwd_dq_writer<D, MASK, kFinish, (FLAGS & kBwdPair) != 0, kTma, bwd_dq_two_stage(FLAGS), kPairTwo,
                    bwd_dq_red(FLAGS), (FLAGS & kBwdTileRecords) != 0, kFence>(p, &tm_dq, smem);
    }
  } else {
    ptx::setmaxnreg_inc<kBwdConsumerRegs>();
    bwd_consumer<DTYPE, D, ACT, MASK, FLAGS>(wg - 1, p, &tm_dk, &tm_dv, smem);
  }
}

}  // namespace gdpa::sm90
