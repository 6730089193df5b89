// sm90.cpp — launcher of the Hopper forward (and backward) kernels: compiles the variant for the
// problem, builds the tile list with the chosen scheduling policy, encodes the TMA descriptors
// and launches a persistent grid of one CTA per SM.
#include "sm90.h"

#include <algorithm>
#include <string>

#include "../kernels/common/masks.cuh"
#include "../kernels/sm90/act_mix.h"
#include "../kernels/sm90/fwd_config.h"
#include "../kernels/sm90/fwd_tail_config.h"
#include "device_problem.h"
#include "sm90_bwd.h"
#include "tensor_map.h"
#include "trace_buffer.h"

namespace gdpa {

namespace {

// The option's ablation flags, plus what the problem allows: a logit_scale of exactly 1 needs no
// multiply before the activation.
int fwd_flags_of(const Sm90Options& o, const ProblemDesc& p) {
  int f = o.fwd_flags < 0 ? sm90::kFwdDefaultFlags & ~o.fwd_flags_drop : o.fwd_flags;
  // The default skips empty halves only where some tile has one: a sequence whose last query tile
  // holds 1..64 rows (its second warpgroup's 64 rows all lie past the end); and branches before
  // the GEMM batch only where that measured faster (both: fwd_config.h).
  if (o.fwd_flags < 0 && p.batch() > 0 &&
      (!some_last_tile_half_empty(p, false, sm90::kFwdBlockM) || (sm90_fwd_tails_apply(o, p) && o.fwd_tail_rows >= 64)))
    f &= ~sm90::kFwdSkipEmptyHalf;
  if (o.fwd_flags < 0 && p.batch() > 0 && p.total_k() < int64_t(sm90::kFwdWholeBatchMinMeanLenK) * p.batch())
    f &= ~sm90::kFwdWholeBatchBranch;
  // The three-warpgroup consumer's steps all accumulate (O starts at zero): the bit would only name
  // a copy of the same kernel. It and the softmax variant have no narrow block.
  if (f & sm90::kFwdThreeConsumers)
    f &= ~(sm90::kFwdWholeBatchBranch | sm90::kFwdStmatrixO | sm90::kFwdNarrowLastBlock);
  if (o.softmax) f = (f & ~sm90::kFwdNarrowLastBlock) | sm90::kFwdSoftmax;
  if (!o.fwd_trace.empty()) f |= sm90::kFwdTrace;
  // Set exactly when logit_scale == 1 (explicit flags too: with another scale the bit would skip
  // the multiply and give a wrong O without a word); the softmax variant never takes it.
  if (p.logit_scale == 1.0f && !o.softmax)
    f |= sm90::kFwdUnitLogitScale;
  else
    f &= ~sm90::kFwdUnitLogitScale;
  if (!o.softmax) f = int(sm90_with_act_mix(f, o, p, false));  // the forward's flags fit an int
  // The narrow last block only where some sequence's last key block holds 1..64 keys (its second
  // step form costs the others), and only in the kernels that keep their registers with it (the
  // final flags decide that, act mix included).
  if (o.fwd_flags < 0 &&
      ((p.batch() > 0 && !some_last_tile_half_empty(p, true, sm90::fwd_block_n(p.head_dim, f))) ||
       !sm90::fwd_narrow_keeps_registers(p.dtype, p.activation, p.mask, p.head_dim, f)))
    f &= ~sm90::kFwdNarrowLastBlock;
  // The record's register pushed ptxas into 4-12 byte spills in the window-mask kernels (whose
  // bounds live across the steps) and 8 bytes in the softmax variant (its row max and sum); the
  // other masks and dtypes compiled clean with it.
  if (o.fwd_flags < 0 && (p.mask == kMaskWindow || o.softmax)) f &= ~sm90::kFwdRecordLanes;
  // The bit follows the option (explicit flags too): it is what makes the launcher leave the last
  // query tiles of at most fwd_tail_rows rows to the query-column tiles.
  if (sm90_fwd_tails_apply(o, p) && !(f & sm90::kFwdThreeConsumers))
    f |= sm90::kFwdAllowDependents;
  else
    f &= ~sm90::kFwdAllowDependents;
  // The sibling tails' bit follows the option too (explicit flags also), and brings what its
  // fourth warpgroup needs: one P buffer, whole last key blocks, no K / V reuse (fwd_config.h).
  if (sm90_fwd_sibling_tails_apply(o, p) && !(f & (sm90::kFwdThreeConsumers | sm90::kFwdTrace)) &&
      (f & sm90::kFwdOuterPipeline))
    f = (f | sm90::kFwdSiblingTails) & ~(sm90::kFwdIntraOverlap | sm90::kFwdNarrowLastBlock | sm90::kFwdKvReuse);
  else
    f &= ~sm90::kFwdSiblingTails;
  return f;
}

KernelSource fwd_source(const ProblemDesc& p, int flags) {
  KernelSource s;
  s.file = "kernels/sm90/gdpa_fwd.cu";
  s.name_expression = "gdpa::sm90::gdpa_fwd<" + std::to_string(int(p.dtype)) + "," + std::to_string(p.head_dim) +
                      "," + std::to_string(int(p.activation)) + "," + std::to_string(int(p.mask)) + "," +
                      std::to_string(flags) + ">";
  return s;
}

// The query-column tiles' kernel: the main forward's flags that it reads (the logit scale of 1 and
// the halved P), so that the main kernel's other switches do not name copies of it.
KernelSource tail_source(const ProblemDesc& p, int main_flags) {
  const int flags = main_flags & (sm90::kFwdUnitLogitScale | sm90::kFwdHalfFold);
  KernelSource s;
  s.file = "kernels/sm90/fwd_tail.cu";
  s.name_expression = "gdpa::sm90::gdpa_fwd_tail<" + std::to_string(int(p.dtype)) + "," + std::to_string(p.head_dim) +
                      "," + std::to_string(int(p.activation)) + "," + std::to_string(flags) + ">";
  return s;
}

// A tile record's geometry: the tile of rows m0.. of tile w's sequence and head (its key range and
// flags left empty for the caller).
sm90::FwdTileRecord record_geometry(const ProblemDesc& p, const WorkTile& w, int m0) {
  sm90::FwdTileRecord t{};
  const int b = w.batch;
  t.q_row = p.q_begin(b) + m0;
  t.k_row = p.k_begin(b);
  t.len_q = p.len_q(b);
  t.len_k = p.len_k(b);
  t.heads = w.head | ((w.head / p.group()) << 16);
  t.m0 = m0;
  return t;
}

// Records of the query-column tiles: the tile's first query row, its sequence, and its keys in
// 64-key blocks (kTailBlockN).
std::vector<sm90::FwdTileRecord> tail_records(const ProblemDesc& p, const CtaSchedule& s) {
  std::vector<sm90::FwdTileRecord> r(s.tiles.size());
  for (size_t i = 0; i < s.tiles.size(); ++i) {
    sm90::FwdTileRecord& t = r[i];
    t = record_geometry(p, s.tiles[i], s.tiles[i].block * sm90::kTailMaxRows);  // 64-row blocks
    t.n_range = ((t.len_k + sm90::kTailBlockN - 1) / sm90::kTailBlockN) << 16;
  }
  return r;
}

// Host-side tile records (kernels/sm90/fwd_config.h) for the forward with `flags`: geometry from
// the offsets and the mask, and (kFwdKvReuse) whether the tile can read the K/V its CTA's previous
// tile left in the ring (same keys of the same KV head, few enough blocks to stay resident).
std::vector<sm90::FwdTileRecord> forward_records(const ProblemDesc& p, const CtaSchedule& s, int flags) {
  const int bm = sm90::fwd_block_m(flags), bn = sm90::fwd_block_n(p.head_dim, flags);
  const bool kv_reuse = (flags & sm90::kFwdKvReuse) != 0;
  std::vector<sm90::FwdTileRecord> r(s.tiles.size());
  for (int c = 0; c < s.ctas(); ++c) {
    for (int i = s.cta_begin[size_t(c)]; i < s.cta_begin[size_t(c) + 1]; ++i) {
      const WorkTile& w = s.tiles[size_t(i)];
      sm90::FwdTileRecord& t = r[size_t(i)];
      t = record_geometry(p, w, w.block * bm);
      const int lq = t.len_q, lk = t.len_k;
      int first = 0, last = 0;
      mask_key_range(p.mask, t.m0, std::min(t.m0 + bm, lq), lq, lk, p.window_left, p.window_right, &first, &last);
      const int n0 = last > first ? first / bn : 0, n1 = last > first ? (last + bn - 1) / bn : 0;
      t.n_range = n0 | (n1 << 16);
      t.flags = 0;
      if (kv_reuse && i > s.cta_begin[size_t(c)]) {
        const sm90::FwdTileRecord& prev = r[size_t(i) - 1];
        const int blocks = n1 - n0;
        if (blocks > 0 && blocks <= sm90::fwd_kv_stages(flags) && prev.n_range == t.n_range && prev.k_row == t.k_row &&
            (prev.heads >> 16) == (t.heads >> 16))
          t.flags |= sm90::kFwdTileReusesKv;
      }
    }
  }
  return r;
}

// What the forward's schedule takes a last query tile of at most 64 rows to cost against a whole
// one. With the empty-half skip its second warpgroup issues no GEMM: about 0.75 of a whole tile
// (uniform batches of 192 queries against 512 keys: 1.5 tiles per sequence and head cost 1.76-1.79x
// one whole tile). Dealt as equals, those cheaper tiles fall on the same CTAs round after round
// wherever the tiles per (sequence, head) divide the CTA count (Lq = 320 / 448 / 704 against 512
// keys: modelled, the busiest CTA carries 1.05-1.09x the mean; and the tiles of a sequence drift
// apart, losing their shared K / V in L2: 1.5x the DRAM bytes at Lq = 320). Without the skip the
// snake stays: a half tile still runs every GEMM, and modelling it at 0.9 measured 0.99-1.00x on
// the seed's s = 0.5 L = 1024 / 2048 sets.
constexpr double kFwdSkipHalfTileCost = 0.75;

double fwd_half_tile_cost(const Sm90Options& o, int flags) {
  if (o.fwd_half_tile_cost >= 0) return o.fwd_half_tile_cost;
  return (flags & sm90::kFwdSkipEmptyHalf) ? kFwdSkipHalfTileCost : 1.0;
}

// kFwdSiblingTails: what the schedule takes a piece to add to its host tile's cost, as a share of
// the host's own (its 32 columns against the host's 128 rows). Not yet measured: the fourth
// warpgroup's products run beside the consumers', so the true share may be lower.
constexpr double kFwdPieceCost = double(sm90::kFwdPieceRows) / sm90::kFwdBlockM;

// kFwdSiblingTails: each host tile's piece into its record's flags (fwd_config.h), rows and first row.
void add_pieces(std::vector<sm90::FwdTileRecord>& records, const std::vector<SiblingPiece>& pieces) {
  for (size_t i = 0; i < pieces.size() && i < records.size(); ++i) {
    if (pieces[i].rows == 0) continue;
    if (pieces[i].first > sm90::kFwdPieceMaxFirstRow)
      throw ProblemError("sm90 forward with sibling tails: a sequence of " + std::to_string(records[i].len_q) +
                         " queries is longer than its records can name (" +
                         std::to_string(sm90::kFwdPieceMaxFirstRow + 1) + ")");
    records[i].flags |= sm90::fwd_piece_bits(pieces[i].rows, pieces[i].first);
  }
}

// The forward's per-CTA schedule for the kernel of `flags`: with K/V reuse, the query tiles of a
// (sequence, head) whose keys fit the ring stay together.
CtaSchedule fwd_schedule(const ProblemDesc& p, int flags, SchedulePolicy policy, int sms, double half_tile_cost,
                         int tail_rows = 0) {
  const int resident = (flags & sm90::kFwdKvReuse) ? sm90::fwd_kv_stages(flags) : 0;
  return build_forward_schedule(p, sm90::fwd_block_m(flags), sm90::fwd_block_n(p.head_dim, flags), policy, sms,
                                resident, half_tile_cost, tail_rows);
}

class Sm90Kernel final : public AttentionKernel {
 public:
  explicit Sm90Kernel(const Sm90Options& o) : opt_(o) {}

  std::string name() const override { return opt_.label.empty() ? "sm90" : "sm90-" + opt_.label; }

  std::vector<KernelSource> sources(const ProblemDesc& p, bool backward) const override {
    return sm90_kernel_sources(p, opt_, backward);
  }

  bool is_softmax() const override { return opt_.softmax; }

  bool supports(const ProblemDesc& p, int arch, bool backward, std::string* why) const override {
    if (arch != 90) {
      if (why) *why = "the sm90 kernels need a Hopper GPU (sm_90), this one is sm_" + std::to_string(arch);
      return false;
    }
    if (p.head_dim != 64 && p.head_dim != 128) {
      if (why) *why = "head_dim " + std::to_string(p.head_dim) + " is not supported (64, 128)";
      return false;
    }
    if (backward && opt_.softmax) {
      if (why) *why = "the softmax variant is forward-only (it exists to measure the softmax bookkeeping)";
      return false;
    }
    if (backward) return sm90_backward_supports(p, opt_, why);
    return true;
  }

  void prepare(const ProblemDesc& p, const DeviceInfo& dev, bool backward) override {
    desc_ = p;
    sms_ = dev.sm_count;
    const int flags = fwd_flags_of(opt_, p);
    const CompiledKernel ck = compile_kernel(fwd_source(p, flags), 90);
    fwd_module_ = std::make_unique<Module>(ck.cubin.data(), ck.lowered_name);
    const int tail_rows = (flags & sm90::kFwdAllowDependents) ? opt_.fwd_tail_rows : 0;
    // Beside (fwd_tail_sms > 0): the main forward keeps the SMs the tail kernel does not take.
    const int tail_sms = tail_rows > 0 ? opt_.fwd_tail_sms : 0;
    if (tail_sms < 0 || tail_sms >= sms_)
      throw ProblemError("fwd_tail_sms " + std::to_string(tail_sms) + " must leave the main forward an SM (the GPU has " +
                         std::to_string(sms_) + ")");
    const double half_cost = fwd_half_tile_cost(opt_, flags);
    SiblingTailSchedule sibling;
    if (flags & sm90::kFwdSiblingTails)
      sibling = build_sibling_tail_schedule(p, sm90::fwd_block_m(flags), sm90::fwd_block_n(p.head_dim, flags),
                                            opt_.policy, sms_, half_cost, sm90::kFwdPieceRows, kFwdPieceCost);
    else
      sibling.main = fwd_schedule(p, flags, opt_.policy, sms_ - tail_sms, half_cost, tail_rows);
    const CtaSchedule& sched = sibling.main;
    tail_tiles_ = 0;
    if (tail_rows > 0) prepare_tails(p, flags, tail_rows, tail_sms, sched, half_cost);
    num_tiles_ = int(sched.tiles.size());
    ctas_ = sched.ctas();
    cta_begin_ = DeviceBuffer(sched.cta_begin.size() * sizeof(int));
    cta_begin_.upload(sched.cta_begin);
    std::vector<sm90::FwdTileRecord> records = forward_records(p, sched, flags);
    add_pieces(records, sibling.pieces);
    records_ = DeviceBuffer(records.empty() ? 32 : records.size() * sizeof(sm90::FwdTileRecord));
    if (!records.empty()) records_.upload(records);
    zeros_ = zero_rows_buffer();
    smem_ = size_t(sm90::fwd_smem_request(p.head_dim, flags));
    threads_ = sm90::fwd_threads(flags);
    if (flags & sm90::kFwdTrace)
      trace_ = TraceBuffer(opt_.fwd_trace.empty() ? std::string(kDefaultFwdTracePath) : opt_.fwd_trace,
                           sm90::kFwdTraceCtas, sm90::fwd_consumer_wgs(flags), sm90::kFwdTraceSlots);
    if (smem_ > size_t(dev.max_smem_optin))
      throw CudaError("sm90 forward needs " + std::to_string(smem_) + " bytes of shared memory, the device allows " +
                      std::to_string(dev.max_smem_optin));
    if (backward) {
      bwd_ = make_sm90_backward(opt_);
      bwd_->prepare(p, dev);
    }
  }

  void forward(const DeviceTensors& t, CUstream stream) override {
    if (num_tiles_ == 0 && tail_tiles_ == 0) return;  // every sequence has Lq = 0: nothing to write
    require_16_byte_aligned(t, false, "sm90 forward");
    const ProblemDesc& p = desc_;
    GdpaParams params = make_params(p, t);
    set_jagged_load_params(params, zeros_);
    // Encoding a descriptor is host-only work (no device call) and costs about a microsecond.
    // Q, K and V in boxes of kFwdLoadRows rows, through the jagged view: rows past a sequence's
    // end arrive as zeros (kernels/sm90/jagged_load.cuh says why).
    const int wq = params.load_window_q, wk = params.load_window_k, box = sm90::kFwdLoadRows;
    CUtensorMap tm_q = make_tensor_map_jagged(t.q, p.dtype, p.total_q(), p.heads_q, p.head_dim, wq, box);
    CUtensorMap tm_k = make_tensor_map_jagged(t.k, p.dtype, p.total_k(), p.heads_kv, p.head_dim, wk, box);
    CUtensorMap tm_v = make_tensor_map_jagged(t.v, p.dtype, p.total_k(), p.heads_kv, p.head_dim, wk, box);
    // O is stored 64 rows (one consumer warpgroup's block) x 64 columns at a time (fwd_consumer.cuh).
    CUtensorMap tm_o = make_tensor_map_3d(t.out, p.dtype, p.total_q(), p.heads_q, p.head_dim, 64);
    params.num_tiles = num_tiles_;  // the kernel reads the tile records, not params.tiles
    params.cta_tile_begin = reinterpret_cast<const int*>(cta_begin_.ptr());
    params.tile_records = reinterpret_cast<const void*>(records_.ptr());
    if (trace_.on()) params.trace = trace_.arm(stream);
    LaunchShape shape;
    shape.grid[0] = unsigned(ctas_);
    shape.block[0] = unsigned(threads_);
    shape.dynamic_smem = smem_;
    void* args[] = {&tm_q, &tm_k, &tm_v, &tm_o, &params};
    if (num_tiles_ > 0) launch(fwd_module_->function(), shape, stream, args);
    if (trace_.on()) trace_.save(stream);
    if (tail_tiles_ > 0) {
      // The query-column tiles write rows no main tile writes, so they need nothing of it: they
      // launch as soon as every main CTA has started and take each SM its main CTA leaves, or at
      // once the SMs a main grid of sms - fwd_tail_sms CTAs leaves free. Work queued behind them
      // still waits for both kernels (PERF_NOTES, thirtieth session).
      params.num_tiles = tail_tiles_;
      params.cta_tile_begin = reinterpret_cast<const int*>(tail_begin_.ptr());
      params.tile_records = reinterpret_cast<const void*>(tail_records_.ptr());
      LaunchShape tail_shape;
      tail_shape.grid[0] = unsigned(tail_ctas_);
      tail_shape.block[0] = unsigned(sm90::kTailThreads);
      tail_shape.dynamic_smem = size_t(sm90::tail_smem_request(p.head_dim));
      tail_shape.programmatic = num_tiles_ > 0;  // the main kernel allows it (kFwdAllowDependents)
      void* tail_args[] = {&tm_q, &tm_k, &tm_v, &params};
      launch(tail_module_->function(), tail_shape, stream, tail_args);
    }
  }

  // The query-column tiles of the last query tiles the main schedule `main` left out: dealt to the
  // consumer warpgroups of one CTA per SM (two each), the kernel compiled with the main's flags.
  // Behind the main forward (tail_sms 0) on every SM, longest first; beside it on tail_sms SMs, in
  // the main schedule's modelled time order.
  void prepare_tails(const ProblemDesc& p, int flags, int tail_rows, int tail_sms, const CtaSchedule& main,
                     double half_cost) {
    const CompiledKernel ck = compile_kernel(tail_source(p, flags), 90);
    tail_module_ = std::make_unique<Module>(ck.cubin.data(), ck.lowered_name);
    const int workers = sm90::kTailConsumers * (tail_sms > 0 ? tail_sms : sms_);
    const CtaSchedule s = tail_sms > 0
                              ? build_tail_schedule_beside(p, sm90::kFwdBlockM, tail_rows, workers, main, half_cost)
                              : build_tail_schedule(p, sm90::kFwdBlockM, tail_rows, workers);
    tail_tiles_ = int(s.tiles.size());
    if (tail_tiles_ == 0) return;
    // Workers beyond the tiles get none (the dealing fills the lowest first): no CTA for them.
    tail_ctas_ = (std::min(tail_tiles_, workers) + sm90::kTailConsumers - 1) / sm90::kTailConsumers;
    tail_begin_ = DeviceBuffer(s.cta_begin.size() * sizeof(int));
    tail_begin_.upload(s.cta_begin);
    const std::vector<sm90::FwdTileRecord> records = tail_records(p, s);
    tail_records_ = DeviceBuffer(records.size() * sizeof(sm90::FwdTileRecord));
    tail_records_.upload(records);
  }

  void backward(const DeviceTensors& t, CUstream stream) override {
    if (!bwd_) throw CudaError("sm90 backward was not prepared (prepare(..., backward = true))");
    bwd_->run(t, stream);
  }

 private:
  Sm90Options opt_;
  ProblemDesc desc_;
  int sms_ = 0;
  std::unique_ptr<Module> fwd_module_;
  DeviceBuffer cta_begin_, records_, zeros_;
  int num_tiles_ = 0, ctas_ = 0, threads_ = 0;
  size_t smem_ = 0;
  TraceBuffer trace_;  // kFwdTrace only
  std::unique_ptr<Module> tail_module_;  // the query-column tiles (fwd_tail_rows)
  DeviceBuffer tail_begin_, tail_records_;
  int tail_tiles_ = 0, tail_ctas_ = 0;
  std::unique_ptr<Sm90Backward> bwd_;
};

}  // namespace

std::unique_ptr<AttentionKernel> make_sm90_kernel(const Sm90Options& opt) { return std::make_unique<Sm90Kernel>(opt); }

Sm90ForwardTraffic sm90_forward_traffic(const ProblemDesc& p, int num_sms, int load_rows, bool kv_reuse) {
  const int bm = sm90::kFwdBlockM, bn = sm90::fwd_block_n(p.head_dim);
  if (load_rows <= 0 || bm % load_rows != 0 || bn % load_rows != 0)
    throw ProblemError("forward traffic: load_rows must divide the tile (" + std::to_string(bm) + " rows)");
  const CtaSchedule sched =
      build_forward_schedule(p, bm, bn, SchedulePolicy::kZigzag, num_sms, kv_reuse ? sm90::kFwdKvStages : 0);
  const std::vector<sm90::FwdTileRecord> records =
      forward_records(p, sched, kv_reuse ? sm90::kFwdDefaultFlags : sm90::kFwdDefaultFlags & ~sm90::kFwdKvReuse);
  const double row_bytes = double(p.head_dim) * 2.0;  // one head's row of a 16-bit tensor
  // Rows of a `rows`-row tile whose first `valid` rows are real, in whole boxes (as the kernel loads).
  auto loaded_rows = [&](int rows, int valid) { return sm90::fwd_load_boxes(rows, valid, load_rows) * load_rows; };
  Sm90ForwardTraffic t;
  for (const sm90::FwdTileRecord& r : records) {
    const int n0 = r.n_range & 0xFFFF, n1 = r.n_range >> 16;
    if (n1 <= n0) continue;  // sees no key: writes zeros, loads nothing
    t.loaded_bytes += loaded_rows(bm, r.len_q - r.m0) * row_bytes;        // Q
    t.loaded_bytes += std::min(bm, r.len_q - r.m0) * row_bytes;           // O
    if (r.flags & sm90::kFwdTileReusesKv) continue;
    for (int n = n0; n < n1; ++n) t.loaded_bytes += 2.0 * loaded_rows(bn, r.len_k - n * bn) * row_bytes;  // K, V
  }
  t.minimum_bytes = 2.0 * double(p.total_q()) * p.q_row() * 2.0 + 2.0 * double(p.total_k()) * p.k_row() * 2.0;
  return t;
}

Sm90ForwardBalance sm90_forward_balance(const ProblemDesc& p, int num_sms) {
  const Sm90Options opt;
  const int flags = fwd_flags_of(opt, p);
  const int bm = sm90::fwd_block_m(flags);
  Sm90ForwardBalance b;
  b.half_tile_cost = fwd_half_tile_cost(opt, flags);
  const CtaSchedule dealt = fwd_schedule(p, flags, opt.policy, num_sms, b.half_tile_cost);
  const CtaSchedule snake = fwd_schedule(p, flags, opt.policy, num_sms, 1.0);
  b.dealt_skew = modelled_cta_load(p, dealt, bm, b.half_tile_cost).max_over_mean;
  b.snake_skew = modelled_cta_load(p, snake, bm, b.half_tile_cost).max_over_mean;
  return b;
}

long long sm90_with_act_mix(long long flags, const Sm90Options& opt, const ProblemDesc& p, bool backward) {
  if (p.activation != kFastGelu) return flags;
  return sm90::with_act_mix(flags, opt.act_mix < 0 ? sm90::act_mix_default(p.head_dim, backward) : opt.act_mix);
}

namespace {
// What both query-column forms (the tail kernel and the sibling tails) are built for: GDPA (not the
// softmax variant), D = 128, no mask (keys past the end are zero rows, so no compare is needed).
bool query_columns_fit(const Sm90Options& o, const ProblemDesc& p) {
  return !o.softmax && p.head_dim == 128 && p.mask == kMaskNone;
}
}  // namespace

bool sm90_fwd_tails_apply(const Sm90Options& o, const ProblemDesc& p) {
  return o.fwd_tail_rows > 0 && query_columns_fit(o, p);
}

bool sm90_fwd_sibling_tails_apply(const Sm90Options& o, const ProblemDesc& p) {
  const bool asked = o.fwd_sibling_tails || (o.fwd_flags >= 0 && (o.fwd_flags & sm90::kFwdSiblingTails) != 0);
  return asked && !sm90_fwd_tails_apply(o, p) && query_columns_fit(o, p);
}

std::vector<KernelSource> sm90_kernel_sources(const ProblemDesc& p, const Sm90Options& opt, bool backward) {
  const int fwd_flags = fwd_flags_of(opt, p);
  std::vector<KernelSource> v{fwd_source(p, fwd_flags)};
  if (fwd_flags & sm90::kFwdAllowDependents) v.push_back(tail_source(p, fwd_flags));
  if (backward && !opt.softmax) {
    for (auto& s : sm90_backward_sources(p, opt)) v.push_back(s);
  }
  return v;
}

}  // namespace gdpa
