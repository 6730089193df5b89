// fwd_config.h — tile shapes and the shared-memory plan of the Hopper forward kernel, shared by
// the kernel and the host launcher (which must request the same dynamic shared memory, build
// tensor maps with the same boxes and a tile list with the same BlockM).
#pragma once
#include "../common/enums.h"
#include "../common/portability.h"
#include "act_mix.h"

namespace gdpa::sm90 {

// Ablation switches of the forward kernel (template argument FLAGS). Each one is a single
// optimization of the paper / of FA3, so experiments can switch exactly one off.
enum FwdFlags : int {
  kFwdPingpong = 1,      // the two consumer warpgroups take turns issuing GEMMs (named barriers)
  kFwdOuterPipeline = 2, // double-buffered Q + next tile's first QK^T issued before this tile's epilogue
  kFwdIntraOverlap = 4,  // S_{j+1} = Q K_{j+1}^T issued before O += P_j V_j, activation under the PV GEMM
  kFwdKvReuse = 8,       // consecutive query tiles of one (sequence, head) whose keys fit the K/V ring
                         // keep K and V in shared memory instead of reloading them (short KV)
  kFwdHalfFold = 64,     // GELU tanh forms in bf16: P = round(2 f), one multiply fewer per score, and O
                         // halved once in the epilogue (bit-identical O; activations.cuh act_twice_f)
  kFwdSkipEmptyHalf = 128,  // a consumer warpgroup whose 64 query rows all lie past the sequence's end
                            // (a last tile holding at most 64 rows) takes its pingpong turns and
                            // releases its slots without issuing GEMMs, activating or storing
  // A step whose PV may or may not accumulate (the tile's first PV starts O over) branches on that
  // before its GEMM batch, between two whole batches (QK^T + PV), instead of between two PV
  // sequences after the QK^T. In the latter form ptxas puts a warpgroup.arrive at each branch
  // target, between QK^T and PV: the warp waits there about as long as the QK^T in flight runs,
  // and the commit group is closed by an extra HGMMA.64x8 after the join.
  kFwdWholeBatchBranch = 16384,
  // The epilogue stages O with stmatrix (epilogue.cuh store_pairs): 8 stores per thread
  // instead of 32 at D = 128, the same bytes. The epilogue is 750-920 cycles of every tile
  // boundary (trace), and its stores compete with the other warpgroup's wgmma operand reads.
  // Measured against the same kernel without it (twentieth session, interleaved): cross 1.01-1.03x,
  // L = 256 1.01-1.02x, s = 0.5 L >= 1024 1.01x, L = 512 0.99x; on for every problem.
  kFwdStmatrixO = 1 << 17,
  // A tile's last key block (not its first) that holds at most 64 keys, the rest lying past the
  // sequence's end, runs narrow: its QK^T as an m64n64 product, its activation over those 64
  // columns and its PV as BN / 32 wgmmas over the same keys. The activation, the forward's
  // limit, shrinks with the keys. At s = 0.5 the 128 x 128 blocks at the sequences' edges hold
  // only 54-91 % useful scores (PERF_NOTES, twenty-third session).
  kFwdNarrowLastBlock = 1 << 18,
  // Each consumer loads the next tile's 32-byte record a tile ahead, one field per lane (one
  // register through the tile), and gathers it by shuffles at the next tile's top. Loaded there
  // instead, ptxas moves the fields to uniform registers at once and the warp waits for the load
  // (an L2 hit: 225-396 cycles of every tile boundary in the trace).
  kFwdRecordLanes = 1 << 19,
  kFwdDefaultFlags = kFwdPingpong | kFwdOuterPipeline | kFwdIntraOverlap | kFwdKvReuse | kFwdHalfFold |
                     kFwdSkipEmptyHalf | kFwdWholeBatchBranch | kFwdStmatrixO | kFwdNarrowLastBlock |
                     kFwdRecordLanes,
  // Not an ablation: chosen by the host when logit_scale == 1, so the activation skips a multiply.
  kFwdUnitLogitScale = 16,
  // Not GDPA: ordinary softmax attention in the same kernel (online row max and row sum, O rescaled
  // every block, normalised at the end), to measure what the softmax bookkeeping costs and what
  // GDPA gains by not having it (the paper's "freed softmax resources").
  kFwdSoftmax = 32,
  // Not an ablation: the profiling variant (registry name sm90-fwd-trace). One thread of each
  // consumer warpgroup of the first kFwdTraceCtas CTAs records FwdTraceEvents into
  // GdpaParams::trace (trace.cuh); experiments/trace_fwd.py reads them.
  kFwdTrace = 8192,
  // Three consumer warpgroups (BlockM = 192) instead of two, each running its blocks in series
  // (activation, then PV_j and QK^T_j+1 issued together; one P buffer, no pingpong): the twelfth
  // session's trace showed a warp waits while the tensor cores take its wgmmas, so with two
  // warpgroups a step is one warpgroup's issue + activation in series; with three, each warp's
  // activation can sit under the other two's GEMMs. With kFwdOuterPipeline, two Q stages, and each
  // warpgroup stages its O in its own rows of the Q stage it has finished with (no O buffers), which
  // leaves room for a ring of four 64-key K/V stages. Experimental.
  kFwdThreeConsumers = 32768,
  // Not an ablation: set by the host where the query-column tiles (fwd_tail.cu) run behind this
  // kernel. Every CTA allows the kernel behind it to launch at its start
  // (griddepcontrol.launch_dependents), so the tail kernel's CTAs take each SM as soon as this
  // kernel's CTA there exits, instead of waiting for the last one.
  kFwdAllowDependents = 1 << 20,
  // Experimental (registry name sm90-fwd-sibling-tails): a sequence's last query rows, at most 64
  // of them after its whole query tiles, ride as query columns in the CTAs of those whole tiles,
  // from the K and V blocks those tiles load anyway, instead of running a half-empty tile of their
  // own. A fourth warpgroup computes them (fwd_sibling_tail.cuh: S^T = K Q^T, O^T += V^T P^T, the
  // queries as the wgmma's N, pieces of at most kFwdPieceRows rows). It needs registers and shared
  // memory the default leaves no room for, so the two consumers give up the second P buffer
  // (kFwdIntraOverlap) and the narrow last block, and stage O in the Q stage they have finished
  // with (fwd_o_in_q) instead of O buffers of their own (PERF_NOTES, "The register and
  // shared-memory plan of tails inside a sibling tile's CTA"). K / V reuse is off with it.
  kFwdSiblingTails = 1 << 21,
  // Every bit a caller may set (the act mix's bits, act_mix.h, are chosen by the host).
  kFwdAllFlags = kFwdDefaultFlags | kFwdUnitLogitScale | kFwdSoftmax | kFwdTrace | kFwdThreeConsumers |
                 kFwdAllowDependents | kFwdSiblingTails,
};

// kFwdSiblingTails: the most query rows one piece holds (the wgmma's N; the fourth warpgroup's
// 88 registers hold a 32-column S^T half block, its P^T and a 128 x 32 O^T), and the bits of a
// host tile's record that name its piece: rows in bits 8-15 of FwdTileRecord::flags, the piece's
// first row (sequence-local) in bits 16-31.
constexpr int kFwdPieceRows = 32;
constexpr int kFwdPieceRowsShift = 8;
constexpr int kFwdPieceFirstShift = 16;
constexpr int kFwdPieceMaxFirstRow = 0xFFFF;
GDPA_HD constexpr bool fwd_sibling_tails(int flags) { return (flags & kFwdSiblingTails) != 0; }
// A record's piece bits (rows 1..255, first row 0..kFwdPieceMaxFirstRow), and back: through
// unsigned, since a first row from 32768 on sets the int's sign bit.
GDPA_HD constexpr int fwd_piece_bits(int rows, int first) {
  return int(unsigned(rows) << kFwdPieceRowsShift | unsigned(first) << kFwdPieceFirstShift);
}
GDPA_HD constexpr int fwd_piece_rows(int record_flags) {
  return int((unsigned(record_flags) >> kFwdPieceRowsShift) & 0xFFu);
}
GDPA_HD constexpr int fwd_piece_first(int record_flags) { return int(unsigned(record_flags) >> kFwdPieceFirstShift); }

// ---- kFwdTrace: the events a consumer warpgroup records (step = the key block's index in its tile)
enum FwdTraceEvent : unsigned {
  kFtTileStart = 1,  // the tile's record is read (once per tile)
  kFtTurn,           // the warpgroup holds its pingpong turn (block 0 unless prefetched, every step, the finish)
  kFtIssued,         // its GEMMs of that turn are issued and the turn passed on
  kFtQkIssued,       // inside an inner step's turn: QK^T_j issued, PV_j-1 not yet
  kFtSReady,         // S of the step's block is complete
  kFtActDone,        // P of that block is computed
  kFtPvDone,         // the previous block's PV GEMM is complete (end of a step)
  kFtLastPvDone,     // the tile's last PV GEMM is complete: the epilogue starts (once per tile)
  kFtEpilogueEnd,    // O staged and its stores issued (once per tile)
  // kFwdThreeConsumers (no turns): a tile's block 0 records kFtTurn and kFtQkIssued before its
  // kFtSReady; every block j then kFtSReady, kFtActDone, these two, and kFtPvDone when PV_j and
  // QK^T_j+1 are complete.
  kFtPvIssued,       // the batch PV_j (+ QK^T_j+1) issued
  kFtOperandsReady,  // V_j (and K_j+1) have arrived: the batch's issue starts
  kFtRecordLoad,     // at a tile's top, before the next tile's record is loaded (once per tile)
};
constexpr int kFwdTraceCtas = 8;
constexpr int kFwdTraceSlots = 8192;  // records per (CTA, consumer warpgroup); later events are dropped

// kFwdSkipEmptyHalf is on by default wherever some last query tile has an empty half (host
// sm90.cpp fwd_flags_of). Until the fortieth session only up to a mean key length of 512: against
// the same kernel without it (self s = 0.5, twelfth session, seven pairs) it gained 1.00-1.04x at
// L = 512, 0.95-1.05x at L = 256, 0.98-1.11x at L = 1024, but lost 0.94-0.98x at L = 2048 in six of
// six pairs, and 0.999-1.006x at L = 1024 / 2048 in the thirty-eighth. Those rounds dealt the
// tiles in snake order, which hands the cheaper half tiles to the same CTAs; dealt by modelled
// load (the thirty-ninth session's schedule, which the skip brings with it) it gained at
// L = 1024 / 2048 too: 1.012-1.019 / 1.010-1.011x on the seed's sets, 1.022-1.023 / 1.007-1.008x
// with jagged keys (interleaved, both orders, `ab-fwd-skip-long-*`). Where no tile has an empty
// half the host leaves it off: compiled in but never taken it cost self s = 1 L = 512 3-4 %
// (twenty-first session, three interleaved rounds, `ab-l512-*`; 0.996-1.004x at L = 256).

// kFwdWholeBatchBranch by default only from this mean key length. Measured against the same kernel
// without it (seventeenth session, explicit flags, three interleaved rounds): 1.04-1.05x self s = 1
// L = 2048, 1.04x L = 1024, 1.01x L = 512, 1.04x s = 0.5 L = 2048, 1.02-1.03x L = 1024 (mean Lk
// 512); then 0.99-1.00x at s = 0.5 L <= 512 and self L = 256, 0.97-1.01x on the cross sets
// (Lk = 256), so it started at 384. On the kernels since the jagged loads (nineteenth session) and
// the stmatrix epilogue, re-measured (twenty-first session, interleaved, `ab-noskip-*`,
// `ab-l512-*`): cross Lk = 256 1.00 / 1.01-1.02 / 1.04-1.07 / 1.05x at Lq = 256..2048, s = 0.5
// L = 512 (mean Lk about 256) 1.02-1.03x, self L = 256 1.00x. s = 0.5 L = 256 (mean Lk about 128)
// was not re-measured and stays below the limit.
constexpr int kFwdWholeBatchMinMeanLenK = 192;

// kFwdNarrowLastBlock by default only in the kernels where it was found to leave ptxas every
// register it needs (twenty-third session): bf16, D = 128, fast_gelu, no mask, logit_scale 1
// (kFwdUnitLogitScale), no act mix, with the pingpong and the outer pipeline; with or without the
// skip path, the whole-batch branch and any other one switch dropped. Elsewhere its second step
// form made some variants spill 64-124 bytes (masks, another logit scale, the heavier activations)
// or serialize their wgmmas for want of registers (ptxas C7511: fp16, D = 64, other activations,
// or without the pingpong or the outer pipeline, depending on the other flags), so those run the
// whole last block. Measured where it applies (five interleaved rounds, both orders): s = 0.5
// L = 256 / 512 / 1024 / 2048 1.007-1.011 / 1.005-1.013 / 1.021-1.024 / 1.019-1.023x. The host also
// leaves it off where no sequence's last key block holds 1..64 keys (a second step form costs the
// others).
GDPA_HD constexpr bool fwd_narrow_keeps_registers(int dtype, int activation, int mask, int head_dim, int flags) {
  return dtype == kBF16 && head_dim == 128 && activation == kFastGelu && mask == kMaskNone &&
         (flags & kFwdUnitLogitScale) != 0 && (flags & kFwdPingpong) != 0 && (flags & kFwdOuterPipeline) != 0 &&
         act_mix_of(flags) == 0;
}

constexpr int kFwdConsumerWarpgroups = 2;  // the default; kFwdThreeConsumers: 3
constexpr int kFwdBlockM = 64 * kFwdConsumerWarpgroups;  // 64 query rows per consumer warpgroup
constexpr int kFwdThreads = 128 * (1 + kFwdConsumerWarpgroups);
constexpr int kFwdKvStages = 2;  // the default; kFwdThreeConsumers: 4 (fwd_kv_stages)
GDPA_HD constexpr int fwd_consumer_wgs(int flags) { return (flags & kFwdThreeConsumers) ? 3 : kFwdConsumerWarpgroups; }
GDPA_HD constexpr int fwd_block_m(int flags) { return 64 * fwd_consumer_wgs(flags); }
// kFwdSiblingTails adds the tail warpgroup after the consumers.
GDPA_HD constexpr int fwd_threads(int flags) {
  return 128 * (1 + fwd_consumer_wgs(flags) + (fwd_sibling_tails(flags) ? 1 : 0));
}

// Q, K and V arrive in TMA boxes of 64 rows, through the jagged maps (jagged_load.cuh): rows past
// a sequence's end are zero-filled and read nothing from L2. A query tile that runs past its end
// skips a 64-row half that holds none of its rows (nothing reads those rows' results); a key block
// loads both halves, because the PV product sums over all its rows and they must be zeros. Why
// the traffic matters: at L = 256 the forward is bound by L2 traffic (ncu, self s = 1 / 0.5: L2 88 /
// 82 % busy, DRAM 79 / 68 %), and with jagged lengths a large share of whole tiles' rows lie past
// the end.
constexpr int kFwdLoadRows = 64;

// Boxes of `box_rows` rows (the kernel's: kFwdLoadRows) of a `rows`-row tile that cover its first
// `valid` rows (at least one box: a tile whose rows all lie past the end does not exist). The
// kernel asks it for query tiles; the host's traffic model (sm90_forward_traffic) for other box
// sizes.
GDPA_HD constexpr int fwd_load_boxes(int rows, int valid, int box_rows = kFwdLoadRows) {
  return valid >= rows ? rows / box_rows : valid <= box_rows ? 1 : (valid + box_rows - 1) / box_rows;
}

// BlockN: keys per inner step, at both head dims. 128 keeps S (64 regs), P (2 x 32) and O (64 regs)
// of a consumer thread inside the 240 registers setmaxnreg gives it at D = 128.
// kFwdThreeConsumers: 64 keys per step, so that S (32), P (16) and O (64) leave room for the
// activation's temporaries in 160 registers (with 128 keys it spilled 432 bytes).
GDPA_HD constexpr int fwd_block_n(int /*head_dim*/, int flags = 0) {
  return (flags & kFwdThreeConsumers) ? 64 : 128;
}
GDPA_HD constexpr int fwd_q_stages(int flags) { return (flags & kFwdOuterPipeline) ? 2 : 1; }
// K/V ring stages. kFwdThreeConsumers: 64-key stages, four of them, so that the ring holds as many
// keys as the default's two 128-key stages (K/V reuse up to Lk = 256) and the first warpgroup can
// run more than a block ahead of the last while the loads of the next blocks are in flight.
GDPA_HD constexpr int fwd_kv_stages(int flags) { return (flags & kFwdThreeConsumers) ? 4 : kFwdKvStages; }
// kFwdThreeConsumers with two Q stages: O is staged in the warpgroup's own 64 rows of the Q stage
// (its last QK^T has read them; the other warpgroups read only theirs), released to the producer
// one tile later, once the TMA store has read it.
// kFwdSiblingTails: the same for the two consumers, which frees the 32 KB of O buffers for the
// tail warpgroup's Q and P^T stages.
GDPA_HD constexpr bool fwd_o_in_q(int flags) {
  return ((flags & kFwdThreeConsumers) || fwd_sibling_tails(flags)) && fwd_q_stages(flags) == 2;
}

// Everything the forward needs about one work tile, computed on the host (host/sm90.cpp) from the
// schedule and the offsets: 32 bytes, two 16-byte loads, no dependent global reads in the kernel.
struct FwdTileRecord {
  int q_row;    // global row of the tile's first query in the packed Q / O
  int k_row;    // global row of the sequence's first key in the packed K / V
  int len_q;    // sequence lengths (the mask and the epilogue's row bound need them)
  int len_k;
  int heads;    // query head | kv head << 16
  int m0;       // sequence-local first query row of the tile
  int n_range;  // first KV block | one-past-last KV block << 16 (empty range: the tile writes zeros)
  int flags;    // kFwdTileReusesKv: this tile reads the K/V the previous tile of its CTA left in the ring;
                // kFwdSiblingTails: the piece this tile carries (kFwdPieceRowsShift, kFwdPieceFirstShift)
};
constexpr int kFwdTileReusesKv = 1;
constexpr int kFwdRecordFields = int(sizeof(FwdTileRecord) / sizeof(int));  // one per lane with kFwdRecordLanes
static_assert(kFwdRecordFields == 8, "kFwdRecordLanes: lane l of a warp loads field l % 8");

// Byte offsets inside the (1024-byte aligned) dynamic shared memory. Every operand tile starts on a
// 1024-byte boundary because the 128-byte swizzle pattern repeats every 8 rows x 128 bytes and the
// wgmma descriptors assume base offset 0.
struct FwdSmemPlan {
  int q_bytes, kv_bytes;           // one Q stage, one K (or V) stage
  int kv_stages;
  int o_bytes;                     // one consumer's O staging: 64 rows (see below)
  bool o_in_q;                     // fwd_o_in_q: no O buffers, O staged in the Q stage
  int q_off, k_off, v_off, o_off, bar_off, total;
  // kFwdSiblingTails: the piece's Q (one 64-row box; it stages the piece's O at the end) and its
  // P^T ([kFwdPieceRows queries][BlockN keys], K-major panels of 64 keys), then their barriers.
  int tail_q_off, tail_p_off, tail_bar_off;
};

// O leaves through shared memory: stored straight from the accumulator fragment, each warp store
// would cover 8 rows x 16 bytes, half of every 32-byte sector (ncu: 50 % excess sectors, the
// forward's largest stall). The staging buffer holds the warpgroup's 64 rows as D / 64 panels of
// [64 rows][128 B] in the 128-byte swizzle, the source layout of the TMA store (epilogue.cuh,
// store_block_tma); the swizzle also keeps the fragment's shared-memory stores free of conflicts.
// Staged in a Q stage (fwd_o_in_q), the panels are [BlockM rows][128 B] apart.

GDPA_HD constexpr FwdSmemPlan fwd_smem_plan(int head_dim, int flags) {
  const int wgs = fwd_consumer_wgs(flags), q_stages = fwd_q_stages(flags);
  FwdSmemPlan s{};
  s.q_bytes = 64 * wgs * head_dim * 2;
  s.kv_bytes = fwd_block_n(head_dim, flags) * head_dim * 2;
  s.kv_stages = fwd_kv_stages(flags);
  s.o_in_q = fwd_o_in_q(flags);
  s.q_off = 0;
  s.k_off = s.q_off + q_stages * s.q_bytes;
  s.v_off = s.k_off + s.kv_stages * s.kv_bytes;
  s.o_bytes = 64 * head_dim * 2;
  s.o_off = s.v_off + s.kv_stages * s.kv_bytes;
  const bool pieces = fwd_sibling_tails(flags);
  s.tail_q_off = s.o_off + (s.o_in_q ? 0 : wgs * s.o_bytes);
  s.tail_p_off = s.tail_q_off + (pieces ? 64 * head_dim * 2 : 0);
  s.bar_off = s.tail_p_off + (pieces ? kFwdPieceRows * fwd_block_n(head_dim, flags) * 2 : 0);
  s.tail_bar_off = s.bar_off + 8 * (2 * q_stages + 4 * s.kv_stages);
  s.total = s.tail_bar_off + (pieces ? 16 : 0);
  return s;
}

// Dynamic shared memory to request: the plan plus slack to align the base to 1024 bytes (the
// runtime only guarantees 16-byte alignment of dynamic shared memory).
GDPA_HD constexpr int fwd_smem_request(int head_dim, int flags) { return fwd_smem_plan(head_dim, flags).total + 1024; }

}  // namespace gdpa::sm90
