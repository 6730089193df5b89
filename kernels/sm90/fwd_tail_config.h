// fwd_tail_config.h — shapes and the shared-memory plan of the forward's query-column tiles
// (fwd_tail.cu), shared by the kernel and the host launcher.
//
// What they are for. The main forward (gdpa_fwd.cu) computes 64 query rows per consumer
// warpgroup, because a wgmma's M is 64. A sequence's last query tile holding r <= 64 rows then
// costs a whole warpgroup's steps and the tile's whole boundary, about 0.75 of a full tile
// (PERF_NOTES, thirty-ninth and forty-second sessions), however small r is. Here the queries are
// the wgmma's N, which comes in steps of 8: S^T = K Q^T and O^T = V^T P^T, a tile of r queries
// computes N = 32 or 64 columns, and each consumer warpgroup runs its own tiles, so one
// warpgroup's tile boundary lies under the other's steps instead of adding to the CTA's time.
#pragma once
#include "../common/portability.h"

namespace gdpa::sm90 {

constexpr int kTailBlockN = 64;     // keys per step: one 64-row TMA box, M of S^T
constexpr int kTailMaxRows = 64;    // queries per tile at most (N of S^T and of O^T)
constexpr int kTailNarrowRows = 32; // a tile of at most this many queries runs N = 32
constexpr int kTailConsumers = 2;   // consumer warpgroups, each with its own tiles and slots
constexpr int kTailThreads = 128 * (1 + kTailConsumers);
constexpr int kTailQStages = 2;     // a tile's Q arrives during the previous tile; its stage stages O
constexpr int kTailKvStages = 2;

// N of a tile of `rows` queries.
GDPA_HD constexpr int tail_cols(int rows) { return rows <= kTailNarrowRows ? kTailNarrowRows : kTailMaxRows; }

// stmatrix.x4.trans of pairs 4m .. 4m + 3 of an m64nN accumulator fragment (rows: keys or head-dim
// entries, columns: queries; kernels/sm90/fragments.cuh has the layout): lane `lane` of warp `warp`
// names the memory row that takes fragment column tail_trans_row, and that row's 8 entries are
// fragment rows tail_trans_col .. + 7. Matrix j = lane / 8 is pair 4m + j: rows 8 (j % 2) of the
// warp's 16, columns 8 (j / 2) of the 16 from 16 m (ptx::stmatrix_x4_trans).
GDPA_HD constexpr int tail_trans_row(int lane, int m) { return 16 * m + (lane & 7) + 8 * (lane >> 4); }
GDPA_HD constexpr int tail_trans_col(int lane, int warp) { return 16 * warp + 8 * ((lane >> 3) & 1); }

// One consumer warpgroup's shared memory, every tile 1024-byte aligned (128-byte swizzle):
//   Q stages: [64 queries][128 B] panels, D / 64 of them (the B operand of S^T, K-major); after a
//     tile's last S^T the same bytes stage its O as [query][D] for the threads' copy to global.
//   K and V stages: [64 keys][128 B] panels (K: the A operand of S^T, K-major; V: the A operand
//     of O^T, M-major, the head dim contiguous).
//   P stages: [64 queries][64 keys] (one panel: P^T as the K-major B operand of O^T), two so that
//     a step's P can be stored while the previous step's O^T still reads the other.
struct TailSmemPlan {
  int q_bytes, kv_bytes, p_bytes;
  int q_off, k_off, v_off, p_off;  // inside one consumer's region
  int consumer_bytes;              // one consumer's region; consumer c's starts at c * consumer_bytes
  int bar_off, total;
};

GDPA_HD constexpr TailSmemPlan tail_smem_plan(int head_dim) {
  TailSmemPlan s{};
  s.q_bytes = kTailMaxRows * head_dim * 2;
  s.kv_bytes = kTailBlockN * head_dim * 2;
  s.p_bytes = kTailMaxRows * kTailBlockN * 2;
  s.q_off = 0;
  s.k_off = s.q_off + kTailQStages * s.q_bytes;
  s.v_off = s.k_off + kTailKvStages * s.kv_bytes;
  s.p_off = s.v_off + kTailKvStages * s.kv_bytes;
  s.consumer_bytes = s.p_off + 2 * s.p_bytes;
  s.bar_off = kTailConsumers * s.consumer_bytes;
  // Per consumer: full and empty barriers (8 bytes each) of its Q, K and V stages.
  s.total = s.bar_off + kTailConsumers * 16 * (kTailQStages + 2 * kTailKvStages);
  return s;
}

GDPA_HD constexpr int tail_smem_request(int head_dim) { return tail_smem_plan(head_dim).total + 1024; }

}  // namespace gdpa::sm90
