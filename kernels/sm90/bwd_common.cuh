// bwd_common.cuh — what the backward's roles share: register budgets, named barriers, work tiles
// and steps, the mbarrier set, the dQ job headers and where a consumer's dQ jobs are staged.
// Part of the Hopper backward: gdpa_bwd.cu has the design, the roles and the kernel.
#pragma once
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
#include "record_lanes.cuh"
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
template <long long FLAGS>
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

// kBwdRecordLanes: field lane % 16 of the record of tile list entry `index` (one register per
// thread; all lanes of a warp read the same 64 bytes), and the tile from those fields, gathered by
// shuffles (so every field is warp-uniform, as bwd_consumer wants).
template <bool PAIR>
__device__ __forceinline__ int bwd_record_field(const GdpaParams& p, int index) {
  constexpr int kFields = int(sizeof(BwdTileRecord) / sizeof(int));
  static_assert(kFields == 16, "lane l of a warp loads field l % 16");
  return record_field_of_lane<kFields>(p.tile_records, bwd_record_index<PAIR>(index));
}
__device__ __forceinline__ BwdTile bwd_tile_from_lanes(int field) {
  auto lane = [&](int l) { return __shfl_sync(0xffffffffu, field, l); };
  return BwdTile{{lane(0), lane(1), lane(2), lane(3), lane(4), lane(5), lane(6), lane(7), lane(8), lane(9)}};
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

}  // namespace gdpa::sm90
