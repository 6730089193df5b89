// fwd_config.h — tile shapes and the shared-memory plan of the Hopper forward kernel, shared by
// the kernel and the host launcher (which must request the same dynamic shared memory, build
// tensor maps with the same boxes and a tile list with the same BlockM).
#pragma once
#include "../common/portability.h"

namespace gdpa::sm90 {

// Ablation switches of the forward kernel (template argument FLAGS). Each one is a single
// optimization of the paper / of FA3, so experiments can switch exactly one off.
enum FwdFlags : int {
  kFwdPingpong = 1,      // the two consumer warpgroups take turns issuing GEMMs (named barriers)
  kFwdOuterPipeline = 2, // double-buffered Q + next tile's first QK^T issued before this tile's epilogue
  kFwdIntraOverlap = 4,  // S_{j+1} = Q K_{j+1}^T issued before O += P_j V_j, activation under the PV GEMM
  kFwdKvReuse = 8,       // consecutive query tiles of one (sequence, head) whose keys fit the K/V ring
                         // keep K and V in shared memory instead of reloading them (short KV)
  kFwdDefaultFlags = kFwdPingpong | kFwdOuterPipeline | kFwdIntraOverlap | kFwdKvReuse,
  // Not an ablation: chosen by the host when logit_scale == 1, so the activation skips a multiply.
  kFwdUnitLogitScale = 16,
};

constexpr int kFwdConsumerWarpgroups = 2;
constexpr int kFwdBlockM = 64 * kFwdConsumerWarpgroups;  // 64 query rows per consumer warpgroup
constexpr int kFwdThreads = 128 * (1 + kFwdConsumerWarpgroups);
constexpr int kFwdKvStages = 2;

// BlockN: keys per inner step. 128 keeps S (64 regs), P (2 x 32) and O (64 regs) of a consumer
// thread inside the 240 registers setmaxnreg gives it at D = 128.
GDPA_HD constexpr int fwd_block_n(int head_dim) { return head_dim == 64 ? 128 : 128; }
GDPA_HD constexpr int fwd_q_stages(int flags) { return (flags & kFwdOuterPipeline) ? 2 : 1; }

// Byte offsets inside the (1024-byte aligned) dynamic shared memory. Every operand tile starts on a
// 1024-byte boundary because the 128-byte swizzle pattern repeats every 8 rows x 128 bytes and the
// wgmma descriptors assume base offset 0.
struct FwdSmemPlan {
  int q_bytes, kv_bytes;           // one Q stage, one K (or V) stage
  int q_off, k_off, v_off, bar_off, total;
};

GDPA_HD constexpr FwdSmemPlan fwd_smem_plan(int head_dim, int block_n, int q_stages) {
  FwdSmemPlan s{};
  s.q_bytes = kFwdBlockM * head_dim * 2;
  s.kv_bytes = block_n * head_dim * 2;
  s.q_off = 0;
  s.k_off = s.q_off + q_stages * s.q_bytes;
  s.v_off = s.k_off + kFwdKvStages * s.kv_bytes;
  s.bar_off = s.v_off + kFwdKvStages * s.kv_bytes;
  s.total = s.bar_off + 8 * (2 * q_stages + 4 * kFwdKvStages);
  return s;
}

// Dynamic shared memory to request: the plan plus slack to align the base to 1024 bytes (the
// runtime only guarantees 16-byte alignment of dynamic shared memory).
GDPA_HD constexpr int fwd_smem_request(int head_dim, int block_n, int flags) {
  return fwd_smem_plan(head_dim, block_n, fwd_q_stages(flags)).total + 1024;
}

}  // namespace gdpa::sm90
