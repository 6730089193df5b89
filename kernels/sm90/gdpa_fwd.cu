// gdpa_fwd.cu — the hand-scheduled Hopper GDPA forward: O = act(logit_scale * Q K^T) * out_scale V
// on packed jagged batches. TMA + mbarrier pipelines, wgmma, explicit warp roles, persistent grid.
//
// Roles (kernels/sm90/fwd_config.h for the shapes):
//   warpgroup 0, one elected lane of warp 0: the producer. Issues every TMA load: Q (one tile per
//     work item, double-buffered so the next tile's Q arrives during this tile's tail), and K and
//     V for each inner step on their own two-stage rings, in 64-row boxes: only the halves of an
//     edge tile or key block that hold its rows. Gives its registers away (setmaxnreg.dec).
//   warpgroups 1 and 2: consumers, 64 query rows each. Per inner step j:
//       S_j = Q K_j^T            (wgmma, both operands in shared memory)
//       O  += P_{j-1} V_{j-1}    (wgmma, P from registers: the S accumulator repacked, no smem trip)
//       P_j = act(S_j)           (in registers, under the PV GEMM: intra-warpgroup overlap)
//     and the two consumers take turns issuing GEMMs (pingpong), so one's activation runs while
//     the other's GEMMs keep the tensor cores busy. A consumer's 64 rows of O leave through
//     shared memory by TMA store (epilogue.cuh).
// There is no softmax: no row max, no row sum, no rescaling of O. Those registers pay for the
// second P buffer that lets P_j be computed while P_{j-1} is still being read by the tensor cores.
//
// Numerics: S and O accumulate in fp32, P is rounded to the input dtype as the tensor cores consume
// it. out_scale multiplies O once in the epilogue instead of every P element: sum_j s*f_j*V_j =
// s * sum_j f_j*V_j, one multiply per output instead of per score (the rounding point of P moves
// by one bf16 rounding of s*f vs f, well inside the tolerance rule).
//
// Files: fwd_common.cuh (named barriers, the mbarrier set, tile records over the lanes),
// fwd_producer.cuh, fwd_consumer_ops.cuh (a consumer's building blocks), fwd_consumer.cuh (the
// pingpong consumer), fwd_consumer_serial.cuh (kFwdThreeConsumers), fwd_sibling_tail.cuh
// (kFwdSiblingTails' fourth warpgroup); this file holds the register budgets and the kernel.
#include "fwd_producer.cuh"
#include "fwd_consumer.cuh"
#include "fwd_consumer_serial.cuh"

namespace gdpa::sm90 {

// Registers per thread after reallocation: 24 x 128 + 240 x 256 = 64,512 <= 65,536. A consumer
// holds S (64), two P buffers (2 x 32) and O (64) at D = 128; at 232 a few loop-carried scalars spill.
constexpr int kProducerRegs = 24;
constexpr int kConsumerRegs = 240;
// kFwdThreeConsumers: 24 x 128 + 160 x 384 = 64,512.
constexpr int kConsumerRegsThree = 160;
// kFwdSiblingTails: 24 x 128 + 200 x 256 + 88 x 128 = 65,536 (fwd_sibling_tail.cuh). 200 holds S,
// one P buffer and O without spilling only without the narrow last block's second step form
// (experiments/register_probe.sh; PERF_NOTES, "The register and shared-memory plan ...").
constexpr int kConsumerRegsSibling = 200;

// ---------------------------------------------------------------------------------------------
// The kernel: barrier set-up, then one branch per role.
// ---------------------------------------------------------------------------------------------
template <int DTYPE, int D, int ACT, int MASK, int FLAGS>
__global__ void __launch_bounds__(fwd_threads(FLAGS), 1)
    gdpa_fwd(const __grid_constant__ ptx::TensorMap tm_q, const __grid_constant__ ptx::TensorMap tm_k,
             const __grid_constant__ ptx::TensorMap tm_v, const __grid_constant__ ptx::TensorMap tm_o,
             const __grid_constant__ GdpaParams p) {
  static_assert(D == 64 || D == 128, "head dim");
  constexpr int QS = fwd_q_stages(FLAGS);
  constexpr int ST = fwd_kv_stages(FLAGS);
  constexpr int kWgs = fwd_consumer_wgs(FLAGS);
  constexpr FwdSmemPlan plan = fwd_smem_plan(D, FLAGS);
  static_assert(plan.q_off % 1024 == 0 && plan.k_off % 1024 == 0 && plan.v_off % 1024 == 0,
                "128B-swizzled tiles must start on 1024-byte boundaries");
  static_assert(plan.o_off % 1024 == 0 && plan.o_bytes % 1024 == 0,
                "O staging panels are 128B-swizzled TMA sources: 1024-byte aligned");
  static_assert(!fwd_sibling_tails(FLAGS) || (plan.tail_q_off % 1024 == 0 && plan.tail_p_off % 1024 == 0),
                "the pieces' Q and P^T stages are 128B-swizzled operands: 1024-byte aligned");

  extern __shared__ unsigned char smem_raw[];
  const unsigned raw = ptx::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + ((1024u - (raw & 1023u)) & 1023u);
  auto* bars = reinterpret_cast<FwdBarriers<FLAGS>*>(smem + plan.bar_off);

  // Rows of a V slot past a sequence's end may not be loaded (kFwdLoadRows); their P entries are 0,
  // and 0 * V must be 0, so the slots start as zeros rather than whatever the last kernel left
  // (a NaN bit pattern there would make 0 * NaN). Later they hold real V rows of earlier tiles.
  for (int i = int(threadIdx.x); i < ST * plan.kv_bytes / 16; i += fwd_threads(FLAGS))
    reinterpret_cast<uint4*>(smem + plan.v_off)[i] = make_uint4(0u, 0u, 0u, 0u);
  ptx::fence_proxy_async_smem();  // the zeros (generic proxy) before the TMA loads (async proxy)
  constexpr bool kPieces = fwd_sibling_tails(FLAGS);
  auto* piece_q = reinterpret_cast<SlotBarriers*>(smem + plan.tail_bar_off);  // kPieces only
  if (threadIdx.x == 0) {
    constexpr unsigned kConsumerWarps = 4 * kWgs;
    // kPieces: the tail warpgroup's four warps release every K and V slot too.
    constexpr unsigned kKvWarps = kConsumerWarps + (kPieces ? 4 : 0);
    for (int s = 0; s < QS; ++s) {
      ptx::mbarrier_init(&bars->q[s].full, 1);
      ptx::mbarrier_init(&bars->q[s].empty, kConsumerWarps);
    }
    for (int s = 0; s < ST; ++s) {
      ptx::mbarrier_init(&bars->k[s].full, 1);
      ptx::mbarrier_init(&bars->k[s].empty, kKvWarps);
      ptx::mbarrier_init(&bars->v[s].full, 1);
      ptx::mbarrier_init(&bars->v[s].empty, kKvWarps);
    }
    if constexpr (kPieces) {
      ptx::mbarrier_init(&piece_q->full, 1);
      ptx::mbarrier_init(&piece_q->empty, 4);
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();

  if constexpr ((FLAGS & kFwdAllowDependents) != 0)
    if (threadIdx.x == 0) ptx::griddepcontrol_launch_dependents();
  const int wg = ptx::warpgroup_id();
  if (wg == 0) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (ptx::warp_id() == 0 && ptx::elect_one()) {
      ptx::prefetch_tensormap(&tm_q);
      ptx::prefetch_tensormap(&tm_k);
      ptx::prefetch_tensormap(&tm_v);
      ptx::prefetch_tensormap(&tm_o);
      fwd_producer<D, MASK, FLAGS>(p, &tm_q, &tm_k, &tm_v, smem);
    }
  } else if constexpr (kWgs == 3) {
    ptx::setmaxnreg_inc<kConsumerRegsThree>();
    fwd_consumer_serial<DTYPE, D, ACT, MASK, FLAGS>(wg - 1, p, &tm_o, smem);
  } else if constexpr (kPieces) {
    static_assert(MASK == kMaskNone, "kFwdSiblingTails: the pieces are computed without a mask");
    if (wg == 1 + kFwdConsumerWarpgroups) {
      ptx::setmaxnreg_dec<kSiblingTailRegs>();
      fwd_sibling_tail_warpgroup<DTYPE, D, ACT, FLAGS>(p, smem, bars->k, bars->v, piece_q, kBarSiblingTail);
    } else {
      ptx::setmaxnreg_inc<kConsumerRegsSibling>();
      fwd_consumer<DTYPE, D, ACT, MASK, FLAGS>(wg - 1, p, &tm_o, smem);
    }
  } else {
    ptx::setmaxnreg_inc<kConsumerRegs>();
    fwd_consumer<DTYPE, D, ACT, MASK, FLAGS>(wg - 1, p, &tm_o, smem);
  }
}

}  // namespace gdpa::sm90
