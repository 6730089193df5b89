// params.h — the one POD parameter block shared by the host driver and every kernel.
//
// Tensors are packed jagged: Q is [total_q, heads_q, head_dim], K and V are
// [total_k, heads_kv, head_dim], row-major and contiguous, so a token's row stride is
// heads * head_dim elements. Sequence b owns rows cu_seqlens[b] .. cu_seqlens[b+1]-1.
#pragma once

namespace gdpa {

// One unit of work of a persistent kernel, built by the host scheduler (host/scheduler.h).
// Forward: `head` is a query head and `block` a query tile (BlockM rows) of sequence `batch`.
// Backward: `head` is a KV head and `block` a KV tile (BlockN rows) of sequence `batch`.
// `work` is the number of inner-loop steps the tile needs (its cost for load balancing).
struct WorkTile {
  int batch;
  int head;
  int block;
  int work;
};

struct GdpaParams {
  // Inputs (device pointers; element type given by the kernel's DType template argument).
  const void* q;
  const void* k;
  const void* v;
  const void* dout;  // backward only
  // Outputs.
  void* out;        // forward
  void* dq;         // backward, input dtype
  void* dk;
  void* dv;
  float* dq_accum;  // backward scratch: [total_q, heads_q, head_dim] fp32, zeroed before launch

  const int* cu_seqlens_q;  // [batch + 1]
  const int* cu_seqlens_k;  // [batch + 1]
  const int* kv_index;      // [batch] or null: query sequence b reads KV sequence kv_index[b]

  int batch;
  int heads_q;
  int heads_kv;
  int group;  // heads_q / heads_kv
  int head_dim;
  int total_q;
  int total_k;
  int max_seqlen_q;
  int max_seqlen_k;
  // The window of the sm90 kernels' jagged load maps (host/tensor_map.h make_tensor_map_jagged),
  // set by the host that builds the maps: query side (Q, dO) and key side (K, V).
  int load_window_q;
  int load_window_k;
  // sm90: kJaggedZeroBytes (kernels/sm90/jagged_window.h) of zeros, copied in place of a load box
  // that lies wholly past its sequence's end.
  const void* zero_rows;

  float logit_scale;  // applied to QK^T before the activation
  float out_scale;    // applied after the activation
  int window_left;    // kMaskWindow only; < 0 means unbounded
  int window_right;

  const WorkTile* tiles;  // persistent kernels walk this list
  int num_tiles;
  int deterministic;      // backward: order dQ accumulation so results are bit-identical
  int* semaphores;        // backward deterministic mode scratch (zeroed before launch)
  // sm90 backward with kBwdDqFollow: the dQ blocks in the follower's order
  // (kernels/sm90/bwd_config.h DqConvertItem; host/sm90_bwd_dq_plan.h).
  const void* dq_follow_items;
  int dq_follow_count;
  int* dq_follow_next;  // the next item to take (zeroed before launch, with the semaphores)
  // Per-CTA tile ranges (host/scheduler.h CtaSchedule): CTA c runs tiles[cta_tile_begin[c]] ..
  // tiles[cta_tile_begin[c + 1] - 1]. Null: the striding contract (tiles c, c + grid, ...).
  const int* cta_tile_begin;
  // Kernel-specific precomputed tile records (kernels/sm90/fwd_config.h FwdTileRecord,
  // bwd_config.h BwdTileRecord), built by the host from `tiles` so the kernel reads one record per
  // tile instead of a chain of dependent loads (tile -> cu_seqlens -> kv_index) whose latency would
  // sit on the critical path.
  const void* tile_records;
  // Profiling variants only (kernels/sm90/trace.cuh): event timestamps of the first CTAs' roles,
  // TraceRecord[CTAs][roles][slots].
  void* trace;
};

// One record of a profiling trace, four 32-bit words: SM cycles (low, high), event | step << 8,
// global timer ns (low 32 bits). The host writes the buffer as an int32 .npy of shape [CTAs, roles,
// slots, 4]; unused records stay zero.
struct TraceRecord {
  unsigned clock_lo, clock_hi, event_step, ns;
};

}  // namespace gdpa
