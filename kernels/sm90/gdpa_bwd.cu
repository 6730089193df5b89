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
//
// Files, one role each, included in this order: bwd_common.cuh (what the roles share),
// bwd_producer.cuh, bwd_dq_writer.cuh, bwd_consumer_ops.cuh (the consumer's building blocks) and
// bwd_consumer.cuh; this file keeps the kernel, its barrier set-up and the role branches.
#include "bwd_producer.cuh"
#include "bwd_dq_writer.cuh"
#include "bwd_consumer.cuh"

namespace gdpa::sm90 {

// ---------------------------------------------------------------------------------------------
// The kernel: barrier set-up, then one branch per role.
// ---------------------------------------------------------------------------------------------
template <int DTYPE, int D, int ACT, int MASK, long long FLAGS>
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
