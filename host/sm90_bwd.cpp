// sm90_bwd.cpp — launcher of the Hopper backward (kernels/sm90/gdpa_bwd.cu, dq_convert.cu, dq_follow.cu).
//
// One backward is three stream operations:
//   1. memset of the fp32 dQ accumulator (deterministic mode: of the semaphores only, since the
//      first contributor of each block stores instead of adding),
//   2. gdpa_bwd: persistent grid over the KV tiles; writes dK, dV, bulk-adds into the accumulator,
//   3. gdpa_bwd_dq_convert: accumulator * logit_scale * out_scale -> dQ in the io dtype (with
//      kBwdDqFinish, the deterministic default, the kernel has written every block that has a
//      contributor, and this pass only writes the zeros of blocks no key tile sees), or, with
//      kBwdDqFollow (the deterministic accumulator path's default), gdpa_bwd_dq_follow, launched
//      with programmatic stream serialization so that it runs beside gdpa_bwd on the SMs that
//      kernel's grid leaves free and converts each block as it completes.
// The accumulator uses the blocked per-query-tile layout of kernels/sm90/bwd_config.h.
// With kBwdPair (every sequence has two KV tiles, no mask) it is only step 2, launched in clusters
// of two CTAs: the two KV tiles of a sequence finish dQ between them in shared memory.
#include "sm90_bwd.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "../kernels/sm90/act_mix.h"
#include "../kernels/sm90/bwd_config.h"
#include "device_problem.h"
#include "sm90_bwd_dq_plan.h"
#include "tensor_map.h"
#include "trace_buffer.h"

namespace gdpa {

// Rewrites a backward tile list so that every (sequence, KV head) has its KV tiles in increasing
// KV index order, each group keeping the list positions it had (so the load balance of the policy
// is kept up to the costs of a group's own tiles swapping places).
//
// Why the deterministic mode needs it: the CTA that owns KV tile n of (b, hk) spins until the
// tiles of (b, hk) that come before it in KV order have added their dQ of the query tile. With
// the persistent contract (CTA c runs positions c, c + grid, ... in order), a tile at round
// r = position / grid can only wait on tiles of rounds <= r if positions increase with n. Then no
// deadlock: all tiles of rounds < r finish (induction); inside round r each CTA holds one tile and
// reaches it after its own earlier rounds, and waits only go to strictly smaller n of the same
// group, so every chain of waits ends. Longest-first and zigzag orders break this (for a window
// mask the tiles at a sequence's edges are cheaper than the middle ones, so they sort later).
void sm90_bwd_order_for_determinism(std::vector<WorkTile>& tiles) {
  std::map<std::pair<int, int>, std::vector<size_t>> groups;  // (batch, head) -> positions, ascending
  for (size_t i = 0; i < tiles.size(); ++i) groups[{tiles[i].batch, tiles[i].head}].push_back(i);
  std::vector<WorkTile> members;
  for (const auto& g : groups) {
    members.clear();
    for (size_t pos : g.second) members.push_back(tiles[pos]);
    std::stable_sort(members.begin(), members.end(),
                     [](const WorkTile& a, const WorkTile& b) { return a.block < b.block; });
    for (size_t k = 0; k < members.size(); ++k) tiles[g.second[k]] = members[k];
  }
}

bool sm90_bwd_pair_eligible(const ProblemDesc& p) {
  if ((p.head_dim != 64 && p.head_dim != 128) || p.mask != kMaskNone || !p.kv_index.empty()) return false;
  for (int b = 0; b < p.batch(); ++b)
    if (p.len_k(b) <= sm90::kBwdBlockN || p.len_k(b) > 2 * sm90::kBwdBlockN) return false;
  return p.batch() > 0;
}

std::vector<sm90::BwdTileRecord> backward_records(const ProblemDesc& p, const std::vector<WorkTile>& tiles, bool pair) {
  const int ranks = pair ? 2 : 1;
  std::vector<sm90::BwdTileRecord> r;
  r.reserve(tiles.size() * size_t(ranks));
  for (const WorkTile& w : tiles)
    for (int rank = 0; rank < ranks; ++rank)
      r.push_back(sm90::bwd_tile_record(p.mask, w.batch, w.head, (w.block + rank) * sm90::kBwdBlockN,
                                        p.k_begin(w.batch), p.len_k(w.batch), p.q_begin(w.batch), p.len_q(w.batch),
                                        p.window_left, p.window_right, p.group()));
  return r;
}

int sm90_bwd_follow_sms(const ProblemDesc& p, const std::vector<WorkTile>& tiles, const Sm90Options& o, int sms) {
  int k = o.dq_follow_sms;
  if (k <= 0) {
    // The follower converts about 90 GB/s per SM on the SMs it has while the backward runs
    // (measured with its CTAs confined to them: one SM took 20 ms for the 1.8 GB of self s = 1
    // L = 512), so the SMs it needs scale with its bytes per unit of backward work: one 64-row
    // block per query tile and head, against the KV tiles each such block meets (R). The best k
    // measured (PERF_NOTES, twenty-eighth session, `kd-*`): 8 / 4 / 2 at self s = 1 L = 512 /
    // 1024 / 2048 (R = 4 / 8 / 16), 6 / 4 / 2-3 at s = 0.5 (this rule gives 8 / 6 / 3, within
    // 0.3-0.8 % of the best there when re-measured, twenty-ninth session `kd2-*`): k = 32 / R,
    // from 2 to 8.
    double steps = 0, blocks = 0;
    for (const WorkTile& t : tiles) steps += t.work;
    for (int b = 0; b < p.batch(); ++b)
      blocks += double((p.len_q(b) + sm90::kBwdBlockM - 1) / sm90::kBwdBlockM) * p.heads_q;
    const double r = blocks > 0 ? steps / blocks : 0;
    k = r > 0 ? int(std::lround(32.0 / r)) : 8;
    k = std::max(2, std::min(8, k));
    k = std::min(k, std::max(1, sms / 8));  // small devices keep most SMs for the backward
  }
  if (k >= sms)
    throw ProblemError("sm90 backward: " + std::to_string(k) + " SMs for the dQ follower leave none of the " +
                       std::to_string(sms) + " to the backward");
  return k;
}

bool sm90_bwd_has_empty_half(const ProblemDesc& p) { return some_last_tile_half_empty(p, true, sm90::kBwdBlockN); }

std::vector<WorkTile> sm90_bwd_pair_items(const std::vector<WorkTile>& tiles) {
  std::vector<WorkTile> items;
  for (const WorkTile& t : tiles)
    if (t.block == 0) items.push_back(t);
  return items;
}

namespace {

// Why a kernel with kBwdPair cannot run a problem (explicit flags; the default asks only where it can).
constexpr const char* kPairNeeds =
    "the flags ask for cluster pairs (kBwdPair), which need no mask, every Lk in (128, 256] and kBwdDqFinish";
// Whether the kernel of `flags` can run p: with kBwdPair, only where the pairs can take it.
bool pair_flags_fit(const ProblemDesc& p, long long flags) {
  return !(flags & sm90::kBwdPair) || (sm90_bwd_pair_eligible(p) && (flags & sm90::kBwdDqFinish));
}

// Whether p has at most n query steps per KV tile on average (group x mean Lq / BlockM): the
// measure of the rules that depend on how few steps a tile's fixed costs are spread over.
bool mean_steps_per_kv_tile_at_most(const ProblemDesc& p, int n) {
  return p.total_q() * int64_t(p.group()) <= int64_t(n) * sm90::kBwdBlockM * p.batch();
}

// The option's ablation flags, plus what the problem allows: a logit_scale of exactly 1 needs no
// multiply before the activation (the same specialisation as the forward's).
long long bwd_flags_of(const Sm90Options& o, const ProblemDesc& p) {
  long long f = o.bwd_flags < 0 ? sm90::kBwdDefaultFlags & ~o.bwd_flags_drop : o.bwd_flags;
  // Some KV tile with keys only in its first half (two of the rules below ask).
  const bool empty_half = sm90_bwd_has_empty_half(p);
  // Set exactly when logit_scale == 1, explicit flags too: the kernel then skips the multiply, so
  // the bit with any other scale would give wrong gradients without a word.
  if (p.logit_scale == 1.0f)
    f |= sm90::kBwdUnitLogitScale;
  else
    f &= ~sm90::kBwdUnitLogitScale;
  // Finishing a block in the kernel needs to know its last contributor: only the fixed order has one.
  if (!o.deterministic) f &= ~sm90::kBwdDqFinish;
  // The default uses it only where it measured faster (bwd_config.h kBwdDqFinishMaxMeanLenK).
  if (o.bwd_flags < 0 && p.batch() > 0 && p.total_k() > int64_t(sm90::kBwdDqFinishMaxMeanLenK) * p.batch())
    f &= ~sm90::kBwdDqFinish;
  // Pairs where the problem allows them and the query steps per KV tile are many enough to pay
  // (bwd_config.h kBwdPairMinMeanLenQ), in either mode: rank 1 adds rank 0's part to its own, one
  // fixed order, so the result is deterministic anyway.
  if (o.bwd_flags < 0 && !(o.bwd_flags_drop & (sm90::kBwdPair | sm90::kBwdDqFinish)) && sm90_bwd_pair_eligible(p) &&
      p.total_q() >= int64_t(sm90::kBwdPairMinMeanLenQ) * p.batch())
    f |= sm90::kBwdPair | sm90::kBwdDqFinish;
  // Rank 1's late wait for its epilogue's stores: by default on pairs with few query steps per KV
  // tile, where it measured faster (bwd_config.h kBwdPairLateStoreWaitMaxStepsPerTile).
  if (o.bwd_flags < 0 && (f & sm90::kBwdPair) && !(o.bwd_flags_drop & sm90::kBwdPairLateStoreWait) &&
      mean_steps_per_kv_tile_at_most(p, sm90::kBwdPairLateStoreWaitMaxStepsPerTile))
    f |= sm90::kBwdPairLateStoreWait;
  // With it, at D = 128, where both measured faster: rank 1's dV in the dS^T halves (dK then waits
  // for no other store; bwd_config.h kBwdPairRank1DvInDs) and rank 0's late wait, at the next
  // tile's first dS^T store (kBwdPairRank0LateStoreWait). At D = 64 ptxas spills 4 bytes with either.
  // An ablation drops one of them.
  if (o.bwd_flags < 0 && (f & sm90::kBwdPairLateStoreWait) && p.head_dim == 128)
    f |= (sm90::kBwdPairRank1DvInDs | sm90::kBwdPairRank0LateStoreWait) & ~o.bwd_flags_drop;
  if (!(f & sm90::kBwdPair)) f &= ~(sm90::kBwdPairTwoStage | sm90::kBwdPairLateStoreWait);  // pairs only
  // Rank 1's dV in the dS^T halves needs the late wait and the deferred job (the first step's wait).
  if (!(f & sm90::kBwdPairLateStoreWait) || !(f & sm90::kBwdDeferDq)) f &= ~sm90::kBwdPairRank1DvInDs;
  // Rank 0's late store wait: pairs with the deferred job (the first step's wait).
  if (!(f & sm90::kBwdPair) || !(f & sm90::kBwdDeferDq)) f &= ~sm90::kBwdPairRank0LateStoreWait;
  if (!(f & sm90::kBwdPairTwoStage)) f &= ~sm90::kBwdPairDvInDs;  // its rank 0 with two buffers only
  // The TMA store is part of the finishing code: without it the bit would only name a copy of the
  // same kernel.
  if (!(f & sm90::kBwdDqFinish)) f &= ~sm90::kBwdDqTmaStore;
  // Tile records by default where dQ is finished in the kernel (the short-KV sets, a few steps per
  // tile: s = 0.5 L = 256 1.02x, the pair sets 1.00x), and on the deterministic accumulator path
  // only where no KV tile has an empty half and the mean Lk is at most kBwdAccRecordsMaxMeanLenK
  // (bwd_config.h: 1.02x at self s = 1 L = 512 / 1024 since dV is staged in V's rows; 0.99-1.01x
  // at s = 0.5). The unordered mode was not measured with them: it keeps the tile list.
  if (o.bwd_flags < 0 && !(f & sm90::kBwdDqFinish) &&
      (!o.deterministic || empty_half ||
       p.total_k() > int64_t(sm90::kBwdAccRecordsMaxMeanLenK) * p.batch()))
    f &= ~sm90::kBwdTileRecords;
  // The next tile's record over the lanes, loaded in the tail, by default only with the ordered
  // finish (no pairs), where it measured faster: s = 0.5 L = 256 1.016-1.018x; the accumulator path
  // and the pairs 0.997-1.006x (bwd_config.h kBwdRecordLanes). An ablation can drop it.
  if (o.bwd_flags < 0 && (f & sm90::kBwdDqFinish) && !(f & sm90::kBwdPair) &&
      !(o.bwd_flags_drop & sm90::kBwdRecordLanes))
    f |= sm90::kBwdRecordLanes;
  // The records over the lanes read the host's records: without them the bit would only name a copy.
  if (!(f & sm90::kBwdTileRecords)) f &= ~sm90::kBwdRecordLanes;
  // The second dQ staging buffer is the partial-sum buffer, which the finish needs: the kernel
  // ignores the bit there, so it is cleared rather than naming a copy of the same kernel.
  if (f & sm90::kBwdDqFinish) f &= ~sm90::kBwdDqTwoStage;
  // dQ added from the registers: in the unordered mode, on the accumulator path only (an ordered
  // add needs the writer's semaphore protocol, and finished blocks are not added at all).
  if (o.deterministic || (f & sm90::kBwdDqFinish)) f &= ~sm90::kBwdDqRed;
  // The default adds from the registers only where that measured faster (bwd_config.h).
  if (o.bwd_flags < 0 && p.batch() > 0 && p.total_k() < int64_t(sm90::kBwdDqRedMinMeanLenK) * p.batch())
    f &= ~sm90::kBwdDqRed;
  // The dQ job's proxy fence in the writer paid on the accumulator path only (1.005-1.02x), while
  // the cluster pairs lost 1-4 % (bwd_config.h kBwdDqFenceAtWriter) and the ordered finish
  // measured within its noise. Added from the registers (kBwdDqRed), a job is not staged and the
  // bit would only name a copy of the same kernel.
  if ((o.bwd_flags < 0 && (f & sm90::kBwdDqFinish)) || (f & sm90::kBwdDqRed)) f &= ~sm90::kBwdDqFenceAtWriter;
  // dK through the dS^T buffers relies on the two-stage path's wait at each tile's start.
  if (!(f & sm90::kBwdDqTwoStage)) f &= ~sm90::kBwdDkInDs;
  // dV in V's rows goes with dK in the dS^T buffers, and leaves during the deferred last dQ job.
  if (!(f & sm90::kBwdDkInDs) || !(f & sm90::kBwdDeferDq)) f &= ~sm90::kBwdDvInV;
  // By default only where it measured faster (bwd_config.h kBwdDvInVMaxMeanLenK).
  if (o.bwd_flags < 0 && p.batch() > 0 && p.total_k() > int64_t(sm90::kBwdDvInVMaxMeanLenK) * p.batch())
    f &= ~sm90::kBwdDvInV;
  // The follower reads the ordered mode's semaphores, and the finish (pairs included) writes its
  // blocks already: elsewhere the bit would only name a copy of the kernel.
  if (!o.deterministic || (f & sm90::kBwdDqFinish)) f &= ~sm90::kBwdDqFollow;
  // The dQ job first (its hand-over under dV and dK) paid with the ordered finish, whose
  // hand-over waits for the earlier contributors' partial sum: 1.03-1.04x at s = 0.5, L = 512, in
  // five runs over two calls; 1.00x at s = 0.5, L = 256; 0.96-0.99x on the accumulator and pair
  // sets (PERF_NOTES, tenth session). Since the writer fences the accumulator path's staged jobs
  // (kBwdDqFenceAtWriter), that path gains too: 1.03-1.04x at self s = 1 L >= 512, 1.02-1.03x at
  // s = 0.5 L = 2048, 1.00-1.01x at s = 0.5 L = 512 / 1024 (twenty-sixth session). Pairs: off.
  if (o.bwd_flags < 0 &&
      ((f & sm90::kBwdPair) || (!(f & sm90::kBwdDqFinish) && !(f & sm90::kBwdDqFenceAtWriter))))
    f &= ~sm90::kBwdDqFirst;
  // The ordered finish (no pairs) with few query steps per KV tile issues each step's dQ job in
  // its own step instead of the next (no kBwdDeferDq): there the deferred job's tail at each
  // tile's end cost more than the overlap gained (bwd_config.h kBwdUndeferredMaxStepsPerTile).
  // Masked problems keep the deferral: undeferred, the causal and window kernels spilled 36-44
  // bytes at D = 128 (ptxas 13.0).
  if (o.bwd_flags < 0 && (f & sm90::kBwdDqFinish) && !(f & sm90::kBwdPair) && p.mask == kMaskNone &&
      p.batch() > 0 && mean_steps_per_kv_tile_at_most(p, sm90::kBwdUndeferredMaxStepsPerTile))
    f &= ~sm90::kBwdDeferDq;
  // The accumulators initialised by the first step's dV / dK wgmmas: by default on the accumulator
  // path where it reads the tile records (self s = 1 L = 512 / 1024 / 2048), where it measured
  // faster (1.004-1.010x at L = 512 / 1024, 1.002-1.008x at 2048); s = 0.5 (no records)
  // 1.000-1.005x, the L = 256 pairs 0.96x (bwd_config.h kBwdFirstStepInitAcc). The first step is
  // its own instantiation only with the deferred job.
  if (o.bwd_flags < 0 && !(f & sm90::kBwdDqFinish) && (f & sm90::kBwdTileRecords) &&
      !(o.bwd_flags_drop & sm90::kBwdFirstStepInitAcc))
    f |= sm90::kBwdFirstStepInitAcc;
  if (!(f & sm90::kBwdDeferDq)) f &= ~sm90::kBwdFirstStepInitAcc;
  // The kernel issues the dQ job first only at D = 128 (bwd_consumer.cuh, kDqFirst): one kernel per
  // behaviour.
  if (p.head_dim != 128) f &= ~sm90::kBwdDqFirst;
  // The activation under the dP^T product paid where dQ is finished in the kernel (pairs, the
  // ordered finish): 1.03-1.04x on the cross sets, 1.01x at s = 0.5 L = 256; 0.98-1.01x on the
  // accumulator path's sets (bwd_config.h kBwdEarlyAct).
  if (o.bwd_flags < 0 && !(f & sm90::kBwdDqFinish)) f &= ~sm90::kBwdEarlyAct;
  if (!sm90::bwd_early_act_fits(p.head_dim, p.activation)) f &= ~sm90::kBwdEarlyAct;  // the kernel would ignore it
  // dS^T published by stmatrix paid where dQ is finished in the kernel (pairs, the ordered finish):
  // 1.01-1.02x on the cross sets and at L = 256; 0.98-0.99x on the accumulator path's long sets
  // (bwd_config.h kBwdStmatrixDs).
  if (o.bwd_flags < 0 && !(f & sm90::kBwdDqFinish)) f &= ~sm90::kBwdStmatrixDs;
  // With the ordered finish (no pairs), the activations that keep P^T and act' apart from dP^T
  // (no kBwdEarlyAct) spilled 4-16 bytes with either stmatrix form and none without (ptxas 13.0,
  // D = 128: gelu, gelu_tanh, fast_gelu_bf16, gelu_taylor6, gelu_poly); there the default keeps
  // the 4-byte stores.
  if (o.bwd_flags < 0 && (f & sm90::kBwdDqFinish) && !(f & sm90::kBwdPair) && p.head_dim == 128 &&
      !sm90::bwd_early_act_fits(p.head_dim, p.activation))
    f &= ~(sm90::kBwdStmatrix | sm90::kBwdStmatrixDs);
  // The idle second half only where some KV tile has one (a sequence with Lk % 128 in 1..64):
  // elsewhere the bit would only name a copy of the same work.
  if (o.bwd_flags < 0 && !empty_half) f &= ~sm90::kBwdSkipEmptyHalf;
  if (!o.bwd_trace.empty()) f |= sm90::kBwdTrace;
  return sm90_with_act_mix(f, o, p, true);
}

std::string template_args(const ProblemDesc& p) {
  return std::to_string(int(p.dtype)) + "," + std::to_string(p.head_dim);
}

KernelSource main_source(const ProblemDesc& p, long long flags) {
  KernelSource s;
  s.file = "kernels/sm90/gdpa_bwd.cu";
  s.name_expression = "gdpa::sm90::gdpa_bwd<" + template_args(p) + "," + std::to_string(int(p.activation)) + "," +
                      std::to_string(int(p.mask)) + "," + std::to_string(flags) + ">";
  return s;
}

KernelSource convert_source(const ProblemDesc& p, long long flags) {
  KernelSource s;
  s.file = "kernels/sm90/dq_convert.cu";
  if (flags & sm90::kBwdDqFollow) {  // the conversion beside the backward
    s.file = "kernels/sm90/dq_follow.cu";
    s.name_expression = "gdpa::sm90::gdpa_bwd_dq_follow<" + template_args(p) + ">";
    return s;
  }
  // FINISHED: the kernel wrote every block with a contributor, so the pass only writes the zeros
  // of the others.
  s.name_expression = "gdpa::sm90::gdpa_bwd_dq_convert<" + template_args(p) + "," +
                      ((flags & sm90::kBwdDqFinish) ? "true" : "false") + ">";
  return s;
}

std::unique_ptr<Module> load(const KernelSource& src) {
  const CompiledKernel ck = compile_kernel(src, 90);
  return std::make_unique<Module>(ck.cubin.data(), ck.lowered_name);
}

class Sm90BackwardImpl final : public Sm90Backward {
 public:
  explicit Sm90BackwardImpl(const Sm90Options& o) : opt_(o) {}

  void prepare(const ProblemDesc& p, const DeviceInfo& dev) override {
    std::string why;
    if (!sm90_backward_supports(p, &why)) throw ProblemError("sm90 backward: " + why);
    const long long flags = bwd_flags_of(opt_, p);
    if (!pair_flags_fit(p, flags)) throw ProblemError(std::string("sm90 backward: ") + kPairNeeds);
    if (flags & ~(sm90::kBwdAllFlags | sm90::kActMixMask))
      throw ProblemError("sm90 backward: unknown flags " + std::to_string(flags));
    pair_ = (flags & sm90::kBwdPair) != 0;
    desc_ = p;
    sms_ = dev.sm_count;
    follow_ = (flags & sm90::kBwdDqFollow) != 0;
    main_ = load(main_source(p, flags));
    if (!pair_) convert_ = load(convert_source(p, flags));

    smem_ = size_t(sm90::bwd_smem_request(p.head_dim));
    if (smem_ > size_t(dev.max_smem_optin))
      throw CudaError("sm90 backward needs " + std::to_string(smem_) + " bytes of shared memory, the device allows " +
                      std::to_string(dev.max_smem_optin));
    std::vector<WorkTile> tiles;
    if (pair_) {
      // The workers are the clusters the device holds at once; a cluster never waits on another,
      // so the policy's order needs no deterministic fix-up.
      LaunchShape shape = main_shape();
      shape.grid[0] = 2;
      const int clusters = max_active_clusters(main_->function(), shape);
      if (clusters < 1) throw CudaError("sm90 backward: the device cannot hold one cluster of two CTAs");
      const std::vector<WorkTile> grid_order =
          build_backward_tiles(p, sm90::kBwdBlockM, sm90::kBwdBlockN, SchedulePolicy::kGridOrder, clusters);
      tiles = apply_policy(sm90_bwd_pair_items(grid_order), opt_.policy, clusters);
      grid_ = 2u * persistent_grid(tiles.size(), clusters);
    } else {
      // kBwdDqFollow: the tiles are dealt to the SMs the follower leaves to the backward, whose
      // number depends on the tiles' work (grid order first, the policy for those workers after).
      tiles = build_backward_tiles(p, sm90::kBwdBlockM, sm90::kBwdBlockN, SchedulePolicy::kGridOrder, sms_);
      const int workers = follow_ ? sms_ - sm90_bwd_follow_sms(p, tiles, opt_, sms_) : sms_;
      // A KV tile whose keys end in its first half (kBwdSkipEmptyHalf) is dealt as a whole one,
      // unlike the forward's half tiles: in the ordered mode it adds its dQ after the group's
      // other tiles, which run beside it, so it runs at their pace, and handing the rounds out by
      // a lower modelled cost spread the group's starts and measured 0.75-0.93x (fortieth
      // session, experiments/PERF_NOTES.md).
      tiles = apply_policy(std::move(tiles), opt_.policy, workers);
      if (opt_.deterministic) sm90_bwd_order_for_determinism(tiles);
      grid_ = persistent_grid(tiles.size(), workers);
    }
    num_tiles_ = int(tiles.size());
    if (follow_) {  // the follower's list, and its grid: as many CTAs as all SMs hold
      const std::vector<sm90::DqConvertItem> items = dq_follow_items(p, tiles);
      follow_count_ = int(items.size());
      follow_items_ = DeviceBuffer(std::max<size_t>(16, items.size() * sizeof(sm90::DqConvertItem)));
      if (!items.empty()) follow_items_.upload(items);
      const LaunchShape shape = follow_shape();
      const int per_sm = max_active_blocks_per_sm(convert_->function(), shape);
      if (per_sm < 1) throw CudaError("sm90 backward: the dQ follower does not fit an SM");
      // Every SM's worth: the CTAs that do not fit beside the backward start as its CTAs exit.
      follow_grid_ = unsigned(std::max(1, std::min(follow_count_, per_sm * sms_)));
    }
    tiles_ = DeviceBuffer(tiles.empty() ? 16 : tiles.size() * sizeof(WorkTile));
    if (!tiles.empty()) tiles_.upload(tiles);
    if (flags & sm90::kBwdTileRecords) {  // otherwise the kernels derive each tile from `tiles`
      const std::vector<sm90::BwdTileRecord> records = backward_records(p, tiles, pair_);
      records_ = DeviceBuffer(std::max<size_t>(64, records.size() * sizeof(sm90::BwdTileRecord)));
      if (!records.empty()) records_.upload(records);
    }

    // Pairs finish every dQ block in the kernel: no accumulator, no semaphores.
    slots_ = sm90::dq_num_slots(p.total_q(), p.batch());
    const size_t acc_floats = pair_ ? 0 : size_t(slots_) * size_t(p.heads_q) * size_t(p.head_dim) * sm90::kBwdBlockM;
    accum_ = DeviceBuffer(std::max<size_t>(16, acc_floats * sizeof(float)));
    zeros_ = zero_rows_buffer();
    // Deterministic mode: one semaphore per (slot, head); with the follower one more int after
    // them, its item counter, zeroed with them.
    const size_t sem_ints = size_t(slots_) * p.heads_q + (follow_ ? 1 : 0);
    semaphores_ = DeviceBuffer(opt_.deterministic && !pair_ ? std::max<size_t>(16, sem_ints * sizeof(int)) : 16);
    if (flags & sm90::kBwdTrace)
      trace_ = TraceBuffer(opt_.bwd_trace.empty() ? std::string(kDefaultBwdTracePath) : opt_.bwd_trace,
                           sm90::kBwdTraceCtas, sm90::kBwdTraceRoles, sm90::kBwdTraceSlots);

  }

  void run(const DeviceTensors& t, CUstream stream) override {
    if (!main_) throw CudaError("sm90 backward: run() before prepare()");
    require_16_byte_aligned(t, true, "sm90 backward");
    const ProblemDesc& p = desc_;
    // Non-deterministic: the kernel only adds (bulk reduce) and dq_convert reads every slot, so the
    // accumulator starts at zero. Deterministic: the first contributor of each block stores and
    // dq_convert writes zeros where the semaphore says nobody did; only the semaphores are zeroed.
    if (pair_) {
      // nothing to clear: every dQ block is finished by the kernel
    } else if (opt_.deterministic) {
      semaphores_.fill_u32(0u, stream);
    } else {
      accum_.fill_u32(0u, stream);
    }

    GdpaParams params = make_params(p, t);
    set_jagged_load_params(params, zeros_);
    const int wq = params.load_window_q, wk = params.load_window_k;  // the maps below use them too
    params.tiles = reinterpret_cast<const WorkTile*>(tiles_.ptr());
    params.tile_records = reinterpret_cast<const void*>(records_.ptr());  // kBwdTileRecords only
    params.num_tiles = num_tiles_;
    params.dq_accum = reinterpret_cast<float*>(accum_.ptr());
    params.deterministic = opt_.deterministic ? 1 : 0;
    params.semaphores = reinterpret_cast<int*>(semaphores_.ptr());
    params.dq_follow_items = reinterpret_cast<const void*>(follow_items_.ptr());  // kBwdDqFollow only
    params.dq_follow_count = follow_count_;
    params.dq_follow_next = follow_ ? params.semaphores + size_t(slots_) * p.heads_q : nullptr;
    if (trace_.on()) params.trace = trace_.arm(stream);

    if (num_tiles_ > 0) {  // no KV rows at all: dK, dV are empty and dQ is all zeros
      // An empty tensor has no map (a dimension of 0 is illegal); with total_q = 0 every tile has
      // work 0 and never loads Q or dO, so a one-row map over the (non-null) buffer is never used.
      const int64_t rows_q = std::max<int64_t>(p.total_q(), 1);
      // Loads through the jagged view: rows past a sequence's end arrive as zeros.
      CUtensorMap tm_q = make_tensor_map_jagged(t.q, p.dtype, rows_q, p.heads_q, p.head_dim, wq, sm90::kBwdBlockM);
      CUtensorMap tm_do = make_tensor_map_jagged(t.dout, p.dtype, rows_q, p.heads_q, p.head_dim, wq, sm90::kBwdBlockM);
      CUtensorMap tm_k =
          make_tensor_map_jagged(t.k, p.dtype, p.total_k(), p.heads_kv, p.head_dim, wk, sm90::kBwdBlockN);
      CUtensorMap tm_v =
          make_tensor_map_jagged(t.v, p.dtype, p.total_k(), p.heads_kv, p.head_dim, wk, sm90::kBwdBlockN);
      // dK and dV leave 64 key rows (one consumer warpgroup's) x 64 columns per TMA store.
      CUtensorMap tm_dk = make_tensor_map_3d(t.dk, p.dtype, p.total_k(), p.heads_kv, p.head_dim, 64);
      CUtensorMap tm_dv = make_tensor_map_3d(t.dv, p.dtype, p.total_k(), p.heads_kv, p.head_dim, 64);
      // Finished dQ blocks (kBwdDqTmaStore) leave the same way: 64 query rows x 64 columns.
      CUtensorMap tm_dq = make_tensor_map_3d(t.dq, p.dtype, rows_q, p.heads_q, p.head_dim, 64);
      LaunchShape shape = main_shape();
      shape.grid[0] = grid_;
      void* args[] = {&tm_q, &tm_k, &tm_v, &tm_do, &tm_dk, &tm_dv, &tm_dq, &params};
      launch(main_->function(), shape, stream, args);
    }
    if (p.total_q() > 0 && follow_) {
      // Behind the backward, allowed to start once all its CTAs hold their SMs (griddepcontrol in
      // gdpa_bwd): on the SMs left free. Without a backward (no KV rows) every block is zeros.
      LaunchShape shape = follow_shape();
      shape.grid[0] = follow_grid_;
      shape.programmatic = num_tiles_ > 0;
      void* args[] = {&params};
      launch(convert_->function(), shape, stream, args);
    } else if (p.total_q() > 0 && !pair_) {
      LaunchShape shape;
      shape.grid[0] = unsigned(slots_);
      shape.grid[1] = unsigned(p.heads_q);
      shape.block[0] = 128;
      void* args[] = {&params};
      launch(convert_->function(), shape, stream, args);
    }
    if (trace_.on()) trace_.save(stream);
  }

 private:
  Sm90Options opt_;
  ProblemDesc desc_;
  int sms_ = 0;
  std::unique_ptr<Module> main_, convert_;
  DeviceBuffer tiles_, records_, accum_, semaphores_, zeros_, follow_items_;
  bool follow_ = false;  // kBwdDqFollow: gdpa_bwd_dq_follow beside the kernel instead of the pass
  int follow_count_ = 0;
  unsigned follow_grid_ = 0;
  int num_tiles_ = 0;
  long long slots_ = 0;
  size_t smem_ = 0;
  bool pair_ = false;  // kBwdPair: clusters of two, no accumulator, no dq_convert
  unsigned grid_ = 0;
  TraceBuffer trace_;  // kBwdTrace only

  static LaunchShape follow_shape() {
    LaunchShape shape;
    shape.block[0] = sm90::kFollowThreads;
    shape.dynamic_smem = sm90::kFollowSmemBytes;
    return shape;
  }

  LaunchShape main_shape() const {
    LaunchShape shape;
    shape.block[0] = sm90::kBwdThreads;
    shape.dynamic_smem = smem_;
    if (pair_) shape.cluster[0] = 2;
    return shape;
  }
};

}  // namespace

bool sm90_backward_supports(const ProblemDesc& p, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (p.head_dim != 64 && p.head_dim != 128)
    return no("head_dim " + std::to_string(p.head_dim) + " is not supported by the sm90 backward (64, 128)");
  if (p.dtype != kBF16 && p.dtype != kFP16) return no("the sm90 backward needs bf16 or fp16 inputs");
  if (!p.kv_index.empty()) return no("kv_index (shared KV) is forward-only");
  if (p.activation < 0 || p.activation >= kNumActivations) return no("unknown activation");
  if (p.mask < 0 || p.mask >= kNumMaskKinds) return no("unknown mask");
  return true;
}

bool sm90_backward_supports(const ProblemDesc& p, const Sm90Options& opt, std::string* why) {
  if (!sm90_backward_supports(p, why)) return false;
  if (!pair_flags_fit(p, bwd_flags_of(opt, p))) {
    if (why) *why = kPairNeeds;
    return false;
  }
  return true;
}

std::unique_ptr<Sm90Backward> make_sm90_backward(const Sm90Options& opt) {
  return std::make_unique<Sm90BackwardImpl>(opt);
}

std::vector<KernelSource> sm90_backward_sources(const ProblemDesc& p, const Sm90Options& opt) {
  const long long flags = bwd_flags_of(opt, p);
  if (flags & sm90::kBwdPair) return {main_source(p, flags)};
  return {main_source(p, flags), convert_source(p, flags)};
}

}  // namespace gdpa
