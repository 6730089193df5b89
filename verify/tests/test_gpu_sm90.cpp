// The Hopper kernels on the GPU against the CPU reference (run where an sm_90 GPU is present;
// `gdpa check` runs the whole matrix, these are the cases `make test` repeats on every change).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "../../host/check.h"
#include "../../host/device_problem.h"
#include "../../host/driver.h"
#include "../../host/generator.h"
#include "../../host/sm90.h"
#include "../../host/sm90_bwd.h"
#include "../../kernels/common/activations.cuh"
#include "../../kernels/sm90/bwd_config.h"
#include "../../kernels/sm90/fwd_config.h"
#include "jagged_problem.h"

using namespace gdpa;

namespace {

void run_cases(bool backward, const std::vector<std::string>& labels, const Sm90Options& opt = {}) {
  Context ctx(0);
  if (ctx.info().arch() != 90) {
    MESSAGE("not an sm_90 GPU: the sm90 kernels are not run here");
    return;
  }
  auto k = make_sm90_kernel(opt);
  for (const CheckCase& c : check_matrix(backward, 20261129)) {
    bool wanted = false;
    for (const std::string& l : labels) wanted = wanted || c.label == l;
    if (!wanted) continue;
    const CheckOutcome o = run_check(*k, c, ctx.info());
    INFO(o.line);
    CHECK((o.pass || o.skipped));
  }
}

// A jagged s = 0.5 batch for the bit-identity tests (first the halved-P form's): both scales differ
// from 1, so the epilogues' 0.5 * out_scale and the activation's logit_scale multiply are
// exercised too. A larger batch gives each CTA several work tiles.
ProblemDesc half_fold_problem(Activation act, uint64_t seed, int heads_q, int heads_kv, int batch = 24,
                              int max_len = 600) {
  ProblemDesc p = jagged_problem(batch, max_len, seed, heads_q, heads_kv);
  p.activation = act;
  p.logit_scale = 0.75f;
  p.out_scale = 1.5f;
  return p;
}

// The forward's tail forms' batch: 64 sequences whose last query tiles hold 1..128 rows after zero
// to two whole tiles, against keys of 1 to 5 blocks of 64 with every remainder; GQA, both scales.
CheckCase tails_case(const char* label, DType dtype, uint64_t seed) {
  CheckCase c;
  c.label = label;
  c.desc = half_fold_problem(kFastGelu, 131, 4, 2, 64);
  c.desc.dtype = dtype;
  std::vector<int> lq(size_t(c.desc.batch())), lk(size_t(c.desc.batch()));
  for (int b = 0; b < c.desc.batch(); ++b) {
    lq[size_t(b)] = 128 * (b % 3) + 1 + (b * 3) % 128;  // remainders 1..128 over the batch
    lk[size_t(b)] = 1 + (b * 37) % 320;               // 1..5 key blocks, any remainder
  }
  c.desc.cu_seqlens_q = offsets_from_lengths(lq);
  c.desc.cu_seqlens_k = offsets_from_lengths(lk);
  c.seed = seed;
  return c;
}

// A jagged GQA batch for the backward's bit-identity tests: fast_gelu, both scales. Causal gets keys
// a third as long as the queries, so the first two thirds of each sequence's query tiles see no key
// (their dQ rows are the small pass's zeros) and dQ blocks have one or several contributors.
ProblemDesc bit_identity_problem(MaskKind mask, int head_dim, uint64_t seed) {
  ProblemDesc p = half_fold_problem(kFastGelu, seed, 4, 2);
  p.mask = mask;
  p.head_dim = head_dim;
  if (mask == kMaskCausal)
    for (int b = 0; b < p.batch(); ++b) p.cu_seqlens_k[b + 1] = p.cu_seqlens_k[b] + p.len_q(b) / 3;
  return p;
}

struct Grads {
  std::vector<uint16_t> dq, dk, dv;
};

// One backward of the sm90 kernel with `opt` on the inputs already in `dp`, outputs poisoned first.
Grads sm90_backward_once(const Sm90Options& opt, const ProblemDesc& p, DeviceProblem& dp, const Context& ctx) {
  auto k = make_sm90_kernel(opt);
  k->prepare(p, ctx.info(), true);
  Stream s;
  dp.poison_outputs(s.get());
  k->backward(dp.view(), s.get());
  s.synchronize();
  Grads g;
  dp.download_grads(g.dq, g.dk, g.dv);
  return g;
}

// Two backward configurations that must agree bit for bit: both run on the inputs in `dp`, and
// dQ (checked complete), dK and dV are compared.
void check_same_backward_bits(const Sm90Options& a_opt, const Sm90Options& b_opt, const ProblemDesc& p,
                              DeviceProblem& dp, const Context& ctx) {
  const Grads a = sm90_backward_once(a_opt, p, dp, ctx), b = sm90_backward_once(b_opt, p, dp, ctx);
  CHECK(a.dq.size() == size_t(p.total_q()) * p.heads_q * p.head_dim);
  CHECK(a.dq == b.dq);
  CHECK(a.dk == b.dk);
  CHECK(a.dv == b.dv);
}

// Many pair tiles: every Lk in (128, 256], and every seventh sequence without queries (its tiles
// write zero gradients and skip the steps), G = 2.
ProblemDesc pair_problem_with_queryless_tiles(uint64_t seed) {
  ProblemDesc p = half_fold_problem(kFastGelu, seed, 4, 2);
  std::vector<int> lq(size_t(p.batch())), lk(size_t(p.batch()));
  for (int b = 0; b < p.batch(); ++b) {
    lq[size_t(b)] = b % 7 ? p.len_q(b) : 0;
    lk[size_t(b)] = 129 + (b * 37) % 128;
  }
  p.cu_seqlens_q = offsets_from_lengths(lq);
  p.cu_seqlens_k = offsets_from_lengths(lk);
  return p;
}

// Element counts of `a` and `b` that differ other than by the sign of a zero (both 16-bit io types
// keep the sign in bit 15 and a zero in no other bit).
size_t values_differing(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  size_t n = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    n += a[i] != b[i] && ((a[i] | b[i]) & 0x7fffu) != 0;
  return n;
}

// check_same_backward_bits up to the sign of zeros.
void check_same_backward_values(const Sm90Options& a_opt, const Sm90Options& b_opt, const ProblemDesc& p,
                                DeviceProblem& dp, const Context& ctx) {
  const Grads a = sm90_backward_once(a_opt, p, dp, ctx), b = sm90_backward_once(b_opt, p, dp, ctx);
  CHECK(a.dv.size() == size_t(p.total_k()) * p.heads_kv * p.head_dim);
  CHECK(values_differing(a.dq, b.dq) == 0);
  CHECK(values_differing(a.dk, b.dk) == 0);
  CHECK(values_differing(a.dv, b.dv) == 0);
}

// check_same_backward_bits on bit_identity_problem for no mask and causal, D = 64 and 128 (D = 64
// alternates the dQ jobs between the consumer warpgroups, D = 128 gives each one per step).
void check_same_bits_over_masks_and_dims(const Sm90Options& a, const Sm90Options& b, uint64_t seed,
                                         const Context& ctx) {
  for (MaskKind mask : {kMaskNone, kMaskCausal}) {
    for (int d : {64, 128}) {
      const ProblemDesc p = bit_identity_problem(mask, d, seed);
      DeviceProblem dp(p, make_inputs(p, seed + 1, true), true);
      CAPTURE(d);
      CAPTURE(int(mask));
      check_same_backward_bits(a, b, p, dp, ctx);
    }
  }
}

// One forward of the sm90 kernel with `opt` on the inputs in `dp`, O poisoned first.
std::vector<uint16_t> sm90_forward_once(const Sm90Options& opt, const ProblemDesc& p, DeviceProblem& dp,
                                        const Context& ctx) {
  auto k = make_sm90_kernel(opt);
  k->prepare(p, ctx.info(), false);
  Stream s;
  dp.poison_outputs(s.get());
  k->forward(dp.view(), s.get());
  s.synchronize();
  std::vector<uint16_t> o;
  dp.download_out(o);
  return o;
}

// Two forward configurations that must agree bit for bit on every element of O.
void check_same_forward_bits(const Sm90Options& a, const Sm90Options& b, const ProblemDesc& p, DeviceProblem& dp,
                             const Context& ctx) {
  const std::vector<uint16_t> oa = sm90_forward_once(a, p, dp, ctx), ob = sm90_forward_once(b, p, dp, ctx);
  CHECK(oa.size() == size_t(p.total_q()) * p.heads_q * p.head_dim);
  CHECK(oa == ob);
}

// check_same_backward_bits on a batch of 96 jagged sequences up to 1100 long (several KV tiles
// per CTA, so that one tile's epilogue meets the next tile's first steps in shared memory), no
// mask and causal, D = 64 and 128; inputs from seed + 1.
void check_same_bits_over_many_tiles(const Sm90Options& a, const Sm90Options& b, uint64_t seed, const Context& ctx) {
  for (MaskKind mask : {kMaskNone, kMaskCausal}) {
    for (int d : {64, 128}) {
      ProblemDesc p = half_fold_problem(kFastGelu, seed, 4, 2, 96, 1100);
      p.mask = mask;
      p.head_dim = d;
      DeviceProblem dp(p, make_inputs(p, seed + 1, true), true);
      CAPTURE(d);
      CAPTURE(int(mask));
      check_same_backward_bits(a, b, p, dp, ctx);
    }
  }
}

// check_same_bits_over_masks_and_dims for explicit backward flags `flags` against the same flags
// without `dropped`: a switch that reorders work must not change a bit.
void check_dropping_changes_no_bits(long long flags, long long dropped, uint64_t seed, const Context& ctx) {
  Sm90Options with, without;
  with.bwd_flags = flags;
  without.bwd_flags = flags & ~dropped;
  check_same_bits_over_masks_and_dims(with, without, seed, ctx);
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("sm90 forward matches the CPU reference on jagged batches") {
    run_cases(false, {"act=fast_gelu", "act=gelu_poly", "act=silu", "D=64", "fp16", "mask=causal",
                      "mask=window(37,5)", "MQA G=4", "Lq=1 with an Lk=0", "scales", "kv_index", "cross Lk!=Lq"});
  }
  TEST_CASE("sm90 three-consumer-warpgroup forward (experimental) matches the CPU reference") {
    Sm90Options o;
    o.fwd_flags = sm90::kFwdThreeConsumers | sm90::kFwdKvReuse | sm90::kFwdHalfFold;
    run_cases(false, {"act=fast_gelu", "act=gelu_poly", "D=64", "fp16", "mask=causal", "mask=window(37,5)",
                      "MQA G=4", "Lq=1 with an Lk=0", "scales", "kv_index", "cross Lk!=Lq"},
              o);
  }
  TEST_CASE("sm90 forward with query-column tiles (experimental) matches the CPU reference") {
    // sm90-fwd-tails: every last query tile of at most 64 rows runs in the tail kernel (queries as
    // the wgmma's N) behind the main forward. The matrix's D = 128 unmasked cases take it (the
    // others run the main forward alone); then a batch whose last tiles hold 1..128 rows (both
    // column forms, <= 32 and 33..64; with sm90-fwd-tails96 also 65..96 cut in two; and beside the
    // main forward, as sm90-fwd-tails-sideN runs them), against keys
    // of 1 to 5 blocks of 64 with every remainder, GQA, both scales and both dtypes: every
    // sequence against the reference.
    Sm90Options o;
    o.fwd_tail_rows = 64;
    run_cases(false, {"act=fast_gelu", "act=gelu_poly", "act=silu", "fp16", "MQA G=4", "Lq=1 with an Lk=0", "scales",
                      "kv_index", "cross Lk!=Lq"},
              o);
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    // {tail rows, SMs beside the main forward}: behind it with 64 and 96 rows, beside it on 12 SMs.
    for (const auto& form : {std::pair<int, int>{64, 0}, {96, 0}, {64, 12}})
    for (DType dt : {kBF16, kFP16}) {
      o.fwd_tail_rows = form.first;
      o.fwd_tail_sms = form.second;
      auto k = make_sm90_kernel(o);
      CAPTURE(form.first);
      CAPTURE(form.second);
      const CheckCase c = tails_case("tails 1..64 rows", dt, 132);
      REQUIRE(sm90_fwd_tails_apply(o, c.desc));
      const CheckOutcome out = run_check(*k, c, ctx.info());
      INFO(out.line);
      CHECK(out.pass);
    }
  }
  TEST_CASE("sm90 forward with sibling tails (experimental) matches the CPU reference") {
    // sm90-fwd-sibling-tails: a last query tile of at most 64 rows rides, in pieces of at most 32
    // rows, in the CTAs of its sequence's whole tiles (a fourth warpgroup, queries as the wgmma's
    // N). The matrix's D = 128 unmasked cases take it (the others run the default); then the tail
    // forms' batch (tails_case: pieces of 1..32 rows, two pieces of a 33..64-row tail, and tails
    // left as tiles) in both dtypes: every sequence against the reference.
    Sm90Options o;
    o.fwd_sibling_tails = true;
    run_cases(false, {"act=fast_gelu", "act=gelu_poly", "act=silu", "fp16", "MQA G=4", "Lq=1 with an Lk=0", "scales",
                      "kv_index", "cross Lk!=Lq"},
              o);
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (DType dt : {kBF16, kFP16}) {
      auto k = make_sm90_kernel(o);
      const CheckCase c = tails_case("sibling tails", dt, 133);
      REQUIRE(sm90_fwd_sibling_tails_apply(o, c.desc));
      const CheckOutcome out = run_check(*k, c, ctx.info());
      INFO(out.line);
      CHECK(out.pass);
    }
  }
  TEST_CASE("sm90 softmax variant matches the softmax CPU reference") {
    Sm90Options o;
    o.softmax = true;
    run_cases(false, {"act=fast_gelu", "D=64", "fp16", "mask=causal", "mask=window(37,5)", "MQA G=4",
                      "Lq=1 with an Lk=0", "scales", "cross Lk!=Lq"},
              o);
  }
  TEST_CASE("sm90 deterministic backward gives the same dQ bits twice, and the unordered mode agrees") {
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    const ProblemDesc p = jagged_problem(40, 700, 77, 4, 2);  // GQA: dK/dV sums too
    const HostInputs in = make_inputs(p, 78, true);
    Sm90Options det;
    det.deterministic = true;
    auto k = make_sm90_kernel(det);
    k->prepare(p, ctx.info(), true);
    DeviceProblem dp(p, in, true);
    Stream s;
    std::vector<uint16_t> dq[2], dk[2], dv[2];
    for (int run = 0; run < 2; ++run) {
      dp.poison_outputs(s.get());
      k->backward(dp.view(), s.get());
      s.synchronize();
      dp.download_grads(dq[run], dk[run], dv[run]);
    }
    CHECK(dq[0] == dq[1]);
    CHECK(dk[0] == dk[1]);
    CHECK(dv[0] == dv[1]);
    // dK and dV never used atomics: the unordered dQ mode must give the same bits for them.
    Sm90Options unordered;
    unordered.deterministic = false;
    auto fast = make_sm90_kernel(unordered);
    fast->prepare(p, ctx.info(), true);
    std::vector<uint16_t> fq, fk, fv;
    dp.poison_outputs(s.get());
    fast->backward(dp.view(), s.get());
    s.synchronize();
    dp.download_grads(fq, fk, fv);
    CHECK(fk == dk[0]);
    CHECK(fv == dv[0]);
  }
  TEST_CASE("sm90 unordered backward: dQ added from the registers agrees with the deterministic dQ") {
    // kBwdDqRed (the unordered mode, from a mean Lk of kBwdDqRedMinMeanLenK): each consumer adds its
    // dQ jobs into the fp32 accumulator with vector reductions. Only the order of the fp32 adds may
    // differ from the deterministic mode (checked against the CPU reference by `gdpa check`), so dQ
    // must agree within one io-dtype rounding step everywhere and exactly almost everywhere; dK and
    // dV bit for bit. Jagged GQA batches (mean Lk about 500), no mask and causal, D = 64 and 128.
    Sm90Options det, red;
    red.deterministic = false;
    auto problem_for = [](MaskKind mask, int d) {
      ProblemDesc p = half_fold_problem(kFastGelu, 111, 4, 2, 24, 1000);
      p.mask = mask;
      p.head_dim = d;
      return p;
    };
    // The batches take the reductions (checked without a GPU too, so the test cannot go vacuous).
    for (MaskKind mask : {kMaskNone, kMaskCausal})
      for (int d : {64, 128}) {
        const std::string name = sm90_backward_sources(problem_for(mask, d), red)[0].name_expression;
        CAPTURE(name);
        REQUIRE((std::stoll(name.substr(name.rfind(',') + 1)) & sm90::kBwdDqRed) != 0);
      }
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (MaskKind mask : {kMaskNone, kMaskCausal})
      for (int d : {64, 128}) {
        const ProblemDesc p = problem_for(mask, d);
        DeviceProblem dp(p, make_inputs(p, 112, true), true);
        const Grads a = sm90_backward_once(det, p, dp, ctx), b = sm90_backward_once(red, p, dp, ctx);
        CHECK(a.dk == b.dk);
        CHECK(a.dv == b.dv);
        REQUIRE(a.dq.size() == size_t(p.total_q()) * p.heads_q * p.head_dim);
        REQUIRE(b.dq.size() == a.dq.size());
        const std::vector<float> x = to_float(a.dq, p.dtype), y = to_float(b.dq, p.dtype);
        // An element that is a small difference of large terms may move by more than a rounding
        // step of its own size when the terms are added in another order: the bound has a floor
        // scaled to the tensor's largest element (a job added at a wrong place would be off by
        // whole values, over many elements).
        float max_abs = 0.0f;
        for (float v : x) max_abs = std::max(max_abs, std::fabs(v));
        size_t equal = 0, far = 0;
        float worst = 0.0f;
        for (size_t i = 0; i < x.size(); ++i) {
          const float diff = std::fabs(x[i] - y[i]);
          if (x[i] == y[i])
            ++equal;
          else if (!(diff <= 0x1p-6f * std::max(std::fabs(x[i]), std::fabs(y[i])) + 0x1p-12f * max_abs))
            ++far;  // also a NaN (an unwritten, poisoned element)
          if (x[i] != y[i]) worst = std::max(worst, diff);
        }
        CAPTURE(int(mask));
        CAPTURE(d);
        CAPTURE(max_abs);
        CAPTURE(worst);
        CHECK(far == 0);
        CHECK(equal >= x.size() * 99 / 100);
      }
  }
  TEST_CASE("sm90 backward: the halved-P GELU form gives the same dQ, dK, dV bits as the plain one") {
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (Activation act : {kFastGelu, kGeluTanh}) {
      const ProblemDesc p = half_fold_problem(act, 93, 4, 2);  // GQA: dK, dV summed over the group
      DeviceProblem dp(p, make_inputs(p, 94, true), true);
      Sm90Options plain;  // deterministic dQ (the default), so dQ can be compared bit for bit
      plain.bwd_flags = sm90::kBwdDefaultFlags & ~sm90::kBwdHalfFold;
      CAPTURE(activation_name(act));
      check_same_backward_bits(Sm90Options{}, plain, p, dp, ctx);
    }
  }
  TEST_CASE("sm90 backward: finishing dQ blocks in the kernel gives the bits of dq_convert") {
    // kBwdDqFinish adds partial + own part, scales and rounds exactly as the accumulator's bulk add
    // and dq_convert do, so dQ must not change by a single bit. Causal with Lk < Lq leaves query
    // tiles no key sees (zeros from the small pass), and GQA gives blocks several heads' parts.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    // Explicit flags: the default leaves the finish off at a mean Lk > 192.
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags, sm90::kBwdDqFinish, 95, ctx);
  }
  TEST_CASE("sm90 backward: dQ converted by the follower gives the bits of the dq_convert pass") {
    // kBwdDqFollow: gdpa_bwd_dq_follow runs beside the backward on the SMs it leaves free, reads
    // each block once its semaphore shows every add and writes the rows with dq_convert's
    // arithmetic. A block read before its last add, a row written past a sequence's end, or a
    // block left out changes dQ. The accumulator path (explicit flags, whatever the mean Lk), no
    // mask and causal (blocks with no contributor: zeros), D = 64 / 128, GQA; then many tiles per
    // CTA, and a window (each block its own contributor range). One and five follower SMs.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    const long long follow = (sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish) | sm90::kBwdDqFollow;
    check_dropping_changes_no_bits(follow, sm90::kBwdDqFollow, 151, ctx);
    for (int sms : {1, 5}) {
      CAPTURE(sms);
      Sm90Options with, without;
      with.bwd_flags = follow;
      with.dq_follow_sms = sms;
      without.bwd_flags = follow & ~sm90::kBwdDqFollow;
      check_same_bits_over_many_tiles(with, without, 153, ctx);
      ProblemDesc p = half_fold_problem(kFastGelu, 155, 4, 2, 96, 1100);
      p.mask = kMaskWindow;
      p.window_left = 300;
      p.window_right = 40;
      DeviceProblem dp(p, make_inputs(p, 156, true), true);
      check_same_backward_bits(with, without, p, dp, ctx);
    }
  }
  TEST_CASE("sm90 backward: finished dQ blocks stored by TMA give the bits of the threads' row copy") {
    // kBwdDqTmaStore changes who writes a finished block's staged rows (the writer's TMA store
    // instead of the consumer's threads), not what is staged; blocks cut by a sequence's end still
    // take the threads' copy. Any difference is a lost, doubled or misplaced block.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    // Explicit flags: the finish everywhere, whatever the mean Lk.
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags, sm90::kBwdDqTmaStore, 96, ctx);
  }
  TEST_CASE("sm90 backward: the dQ job first in its GEMM batch changes no bit of dQ, dK, dV") {
    // kBwdDqFirst reorders one warpgroup's wgmma groups and moves the hand-over under dV and dK:
    // the same products, the same sums. Both the ordered finish and the accumulator path (where
    // the default leaves it off, explicit flags here); pairs are in the pair test.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags, sm90::kBwdDqFirst, 105, ctx);
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish, sm90::kBwdDqFirst, 106, ctx);
  }
  TEST_CASE("sm90 backward: tile records from the host change no bit") {
    // kBwdTileRecords only changes where every role gets its tile's scalars (the host's record or
    // the tile list and the offsets). The ordered finish and the accumulator path (explicit
    // flags), no mask and causal (whose query ranges the records carry); pairs in the pair test.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags, sm90::kBwdTileRecords, 113, ctx);
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish, sm90::kBwdTileRecords, 114, ctx);
  }
  TEST_CASE("sm90 backward: the next tile's record loaded over the lanes in the tail changes no bit") {
    // kBwdRecordLanes (experimental) only changes when and how a consumer reads its next tile's
    // record (one field per lane at the end of the steps, gathered by shuffles at the next top).
    // A wrong field, a stale record or a skipped empty tile would put a tile's gradients in the
    // wrong rows or leave rows unwritten (the outputs are poisoned). Many tiles per CTA on the
    // accumulator path (jagged, with key-less and query-less tiles), the ordered finish over masks
    // and head dims, and cluster pairs.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    Sm90Options lanes, top;
    lanes.bwd_flags = (sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish) | sm90::kBwdRecordLanes;
    top.bwd_flags = lanes.bwd_flags & ~sm90::kBwdRecordLanes;
    check_same_bits_over_many_tiles(lanes, top, 117, ctx);
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags | sm90::kBwdRecordLanes, sm90::kBwdRecordLanes, 118, ctx);
    const ProblemDesc p = pair_problem_with_queryless_tiles(119);
    REQUIRE(sm90_bwd_pair_eligible(p));
    DeviceProblem dp(p, make_inputs(p, 120, true), true);
    Sm90Options pair_lanes, pair_top;
    pair_lanes.bwd_flags = sm90::kBwdDefaultFlags | sm90::kBwdPair | sm90::kBwdRecordLanes;
    pair_top.bwd_flags = pair_lanes.bwd_flags & ~sm90::kBwdRecordLanes;
    check_same_backward_bits(pair_lanes, pair_top, p, dp, ctx);
    // Rank 1's late wait for its epilogue's stores over the same many tiles (query-less and
    // one-step ones among them), where a tile's staged dK / dV meets the next tile's first block.
    Sm90Options pair_late_wait;
    pair_late_wait.bwd_flags = pair_top.bwd_flags | sm90::kBwdPairLateStoreWait;
    check_same_backward_bits(pair_late_wait, pair_top, p, dp, ctx);
    Sm90Options pair_rank1_dv;
    pair_rank1_dv.bwd_flags = pair_late_wait.bwd_flags | sm90::kBwdPairRank1DvInDs;
    check_same_backward_bits(pair_rank1_dv, pair_top, p, dp, ctx);
    Sm90Options pair_rank0_late;
    pair_rank0_late.bwd_flags = pair_rank1_dv.bwd_flags | sm90::kBwdPairRank0LateStoreWait;
    check_same_backward_bits(pair_rank0_late, pair_top, p, dp, ctx);
  }
  TEST_CASE("sm90 backward: dV and dK initialised by the first step's wgmmas change no value") {
    // kBwdFirstStepInitAcc (experimental) drops the zeroing of the dV / dK accumulators at a tile's
    // top: the first step's first dV / dK wgmma slice overwrites them (scale-d 0). A slice that
    // added to stale registers instead would carry the previous tile's gradients into this one;
    // a warpgroup with no keys must still zero. The same values, except that an all-zero sum may
    // now be -0 where it was +0. The accumulator path over many tiles (jagged, key-less and
    // query-less tiles, both masks and head dims), the ordered finish, and cluster pairs.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (bool finish : {false, true}) {
      Sm90Options init, zeroed;
      zeroed.bwd_flags = finish ? sm90::kBwdDefaultFlags : sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish;
      init.bwd_flags = zeroed.bwd_flags | sm90::kBwdFirstStepInitAcc;
      for (MaskKind mask : {kMaskNone, kMaskCausal}) {
        for (int d : {64, 128}) {
          ProblemDesc p = half_fold_problem(kFastGelu, 125, 4, 2, 96, 1100);
          p.mask = mask;
          p.head_dim = d;
          DeviceProblem dp(p, make_inputs(p, 126, true), true);
          CAPTURE(finish);
          CAPTURE(d);
          CAPTURE(int(mask));
          check_same_backward_values(init, zeroed, p, dp, ctx);
        }
      }
    }
    const ProblemDesc p = pair_problem_with_queryless_tiles(127);
    REQUIRE(sm90_bwd_pair_eligible(p));
    DeviceProblem dp(p, make_inputs(p, 128, true), true);
    Sm90Options pair_init, pair_zeroed;
    pair_zeroed.bwd_flags = sm90::kBwdDefaultFlags | sm90::kBwdPair;
    pair_init.bwd_flags = pair_zeroed.bwd_flags | sm90::kBwdFirstStepInitAcc;
    check_same_backward_values(pair_init, pair_zeroed, p, dp, ctx);
  }
  TEST_CASE("sm90 backward: proxy fences in the issuing and reading threads change no bit") {
    // kBwdDqFenceAtWriter and kBwdDsFenceAtReader move the generic -> async proxy fence of the
    // staged dQ jobs and the dS^T halves from the storing threads to the threads that issue the
    // async reads, after their barrier waits. A fence that no longer orders the stores shows as
    // stale or half-written blocks: dQ, dK and dV must keep every bit. Ordered finish and
    // accumulator path (explicit flags: the writer's fence also where the default leaves it off),
    // twice each (a race need not show on every run); pairs in the pair test.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    const long long moved = sm90::kBwdDqFenceAtWriter | sm90::kBwdDsFenceAtReader;
    for (int round = 0; round < 2; ++round) {
      check_dropping_changes_no_bits(sm90::kBwdDefaultFlags, moved, 141 + uint64_t(round), ctx);
      check_dropping_changes_no_bits(sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish, moved, 143 + uint64_t(round), ctx);
    }
  }
  TEST_CASE("sm90 backward: the activation under the dP^T product changes no bit of dQ, dK, dV") {
    // kBwdEarlyAct computes P^T and act' once S^T has landed and multiplies by dP^T after it: the
    // same fp32 operations on the same values, in two commit groups instead of one. The ordered
    // finish and the accumulator path here (explicit flags, whatever the mean Lk); pairs, where
    // the default uses it, in the pair test.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags, sm90::kBwdEarlyAct, 109, ctx);
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish, sm90::kBwdEarlyAct, 110, ctx);
  }
  TEST_CASE("sm90 backward: dK staged in the dS^T buffers changes no bit of dQ, dK, dV") {
    // kBwdDkInDs only moves where dK is staged for its TMA store (our halves of the two dS^T
    // buffers, once the tile's last dQ jobs have read them); a missing wait would show as a dK or
    // dQ block overwritten early. The accumulator path (explicit flags, whatever the mean Lk),
    // many KV tiles per CTA, so that an epilogue's staged dK meets the next tile's dS^T stores.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    Sm90Options in_ds, usual;
    in_ds.bwd_flags = sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish;
    usual.bwd_flags = in_ds.bwd_flags & ~sm90::kBwdDkInDs;
    check_same_bits_over_many_tiles(in_ds, usual, 111, ctx);
  }
  TEST_CASE("sm90 backward: dV staged in V's rows changes no bit of dQ, dK, dV") {
    // kBwdDvInV stages dV in the warpgroup's own rows of the V tile and gives V back to the
    // producer only after dV's store has read them: a release too early would let the next
    // tile's V load overwrite dV before its store (dV changes), one missing would hang. Many KV
    // tiles per CTA (jagged, so partial last blocks take the threads' copy), and the small cases
    // of both masks and head dims.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    Sm90Options in_v, usual;
    in_v.bwd_flags = sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish;
    usual.bwd_flags = in_v.bwd_flags & ~sm90::kBwdDvInV;
    check_same_bits_over_many_tiles(in_v, usual, 113, ctx);
    check_dropping_changes_no_bits(in_v.bwd_flags, sm90::kBwdDvInV, 115, ctx);
  }
  TEST_CASE("sm90 backward: two dQ staging buffers change no bit of dQ, dK, dV") {
    // kBwdDqTwoStage (the accumulator path) stages each consumer's dQ jobs alternately in two
    // buffers and a tile's dK / dV in the one its next job takes: the same jobs, added in the same
    // KV order. A batch of several KV tiles per CTA, so that one CTA's epilogues and the first jobs
    // of its later tiles meet in one buffer; D = 64 gives each consumer every other step's job.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    Sm90Options two, one;  // explicit flags: the accumulator path whatever the mean Lk
    two.bwd_flags = sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish;
    one.bwd_flags = two.bwd_flags & ~sm90::kBwdDqTwoStage;
    check_same_bits_over_many_tiles(two, one, 107, ctx);
  }
  TEST_CASE("sm90 backward: taking turns at the tensor cores changes no bit of dQ, dK, dV") {
    // kBwdPingpong only orders the two consumer warpgroups' GEMM batches; with the deterministic dQ
    // order every sum is formed the same way, so any difference is a synchronisation bug.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    Sm90Options turns, free_running;
    free_running.bwd_flags_drop = sm90::kBwdPingpong;
    check_same_bits_over_masks_and_dims(turns, free_running, 97, ctx);
  }
  TEST_CASE("sm90 backward: KV tiles in cluster pairs give the bits of the ordered finish") {
    // kBwdPair finishes each dQ chunk as the partner's part + its own, the same single add the
    // ordered finish does (partial + own part, fp32 addition commutes), so dQ, dK and dV must not
    // change by a bit. Every Lk in (128, 256] so the pairs apply; jagged Lq with 0 and 1; GQA.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (DType dt : {kBF16, kFP16}) {
      ProblemDesc p = half_fold_problem(kFastGelu, 98, 4, 2);
      p.dtype = dt;
      p.head_dim = dt == kFP16 ? 64 : 128;  // D = 64: the consumers take the step's one job in turn
      std::vector<int> lq(size_t(p.batch())), lk(size_t(p.batch()));
      for (int b = 0; b < p.batch(); ++b) {
        lq[size_t(b)] = p.len_q(b);
        lk[size_t(b)] = 129 + (b * 37) % 128;
      }
      lq[0] = 0;
      lq[1] = 1;
      p.cu_seqlens_q = offsets_from_lengths(lq);
      p.cu_seqlens_k = offsets_from_lengths(lk);
      REQUIRE(sm90_bwd_pair_eligible(p));
      DeviceProblem dp(p, make_inputs(p, 99, true), true);
      Sm90Options pairs, ordered, pairs_rows;  // explicit flags: used as given, whatever the mean Lq
      pairs.bwd_flags = sm90::kBwdDefaultFlags | sm90::kBwdPair;
      ordered.bwd_flags = sm90::kBwdDefaultFlags;
      pairs_rows.bwd_flags = pairs.bwd_flags & ~sm90::kBwdDqTmaStore;  // rank 1's threads copy the rows
      Sm90Options pairs_plain;  // the pair default: the dQ job after dV and dK (kBwdDqFirst off)
      pairs_plain.bwd_flags = pairs.bwd_flags & ~sm90::kBwdDqFirst;
      Sm90Options pairs_late;  // P^T and act' only after dP^T has landed (kBwdEarlyAct off)
      pairs_late.bwd_flags = pairs.bwd_flags & ~sm90::kBwdEarlyAct;
      Sm90Options pairs_one_buffer;  // rank 0 stages every job in one buffer (kBwdPairTwoStage off)
      pairs_one_buffer.bwd_flags = pairs.bwd_flags & ~sm90::kBwdPairTwoStage;
      Sm90Options pairs_dv_after;  // rank 0's dV in the next job's buffer, dK after it (kBwdPairDvInDs off)
      pairs_dv_after.bwd_flags = pairs.bwd_flags & ~sm90::kBwdPairDvInDs;
      Sm90Options pairs_sts;  // 4-byte shared stores instead of stmatrix (kBwdStmatrix, kBwdStmatrixDs off)
      pairs_sts.bwd_flags = pairs.bwd_flags & ~(sm90::kBwdStmatrix | sm90::kBwdStmatrixDs);
      Sm90Options pairs_fenced;  // every storing thread fences (kBwdDqFenceAtWriter, kBwdDsFenceAtReader off)
      pairs_fenced.bwd_flags = pairs.bwd_flags & ~(sm90::kBwdDqFenceAtWriter | sm90::kBwdDsFenceAtReader);
      // Rank 1 waits for its epilogue's stores only where the staging buffer is next written
      // (kBwdPairLateStoreWait): a missing wait shows as a dK / dV or dQ block overwritten early.
      Sm90Options pairs_late_wait, pairs_late_wait_rows;
      pairs_late_wait.bwd_flags = pairs.bwd_flags | sm90::kBwdPairLateStoreWait;
      pairs_late_wait_rows.bwd_flags = pairs_late_wait.bwd_flags & ~sm90::kBwdDqTmaStore;
      // ... with rank 1's dV in the dS^T halves (kBwdPairRank1DvInDs): the next tile's first dS^T
      // store waits for it.
      Sm90Options pairs_rank1_dv;
      pairs_rank1_dv.bwd_flags = pairs_late_wait.bwd_flags | sm90::kBwdPairRank1DvInDs;
      Sm90Options pairs_rank0_late;  // ... and rank 0's epilogue without its wait (experimental)
      pairs_rank0_late.bwd_flags = pairs_rank1_dv.bwd_flags | sm90::kBwdPairRank0LateStoreWait;
      CAPTURE(int(dt));
      CAPTURE(p.head_dim);
      check_same_backward_bits(pairs, ordered, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_rows, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_plain, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_late, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_one_buffer, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_dv_after, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_sts, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_fenced, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_late_wait, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_late_wait_rows, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_rank1_dv, p, dp, ctx);
      check_same_backward_bits(pairs, pairs_rank0_late, p, dp, ctx);
    }
  }
  TEST_CASE("sm90 backward: the dQ job in its own step or deferred to the next gives the same bits") {
    // kBwdDeferDq only moves each step's dQ product (the same wgmmas over the same dS^T) a step
    // later; the ordered finish's default runs it undeferred. Over masks and head dims, both ways
    // round, so dQ, dK and dV must keep every bit.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags, sm90::kBwdDeferDq, 135, ctx);
  }
  TEST_CASE("sm90 backward: a warpgroup whose keys lie past the end skipping its work changes no bit") {
    // kBwdSkipEmptyHalf: on a KV tile with Lk - n0 <= 64 the second warpgroup issues only its dQ
    // jobs, over a dS^T half it zeroed once per tile. Its keys' products are exact zeros either
    // way, so dQ, dK and dV must keep every bit. The jagged batches have many such tiles, next to
    // whole ones (the zeros must be rewritten after a tile that used the half, and after dK / dV
    // staged in the dS^T buffers on the accumulator path); the ordered finish, the accumulator
    // path over many KV tiles, and pairs whose rank 1 is idle (128 < Lk <= 192).
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    check_dropping_changes_no_bits(sm90::kBwdDefaultFlags, sm90::kBwdSkipEmptyHalf, 131, ctx);
    Sm90Options with, without;
    with.bwd_flags = sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish;
    without.bwd_flags = with.bwd_flags & ~sm90::kBwdSkipEmptyHalf;
    check_same_bits_over_many_tiles(with, without, 132, ctx);
    for (int d : {64, 128}) {
      ProblemDesc p = half_fold_problem(kFastGelu, 133, 4, 2, 16);
      p.head_dim = d;
      std::vector<int> lq(size_t(p.batch())), lk(size_t(p.batch()));
      for (int b = 0; b < p.batch(); ++b) {
        lq[size_t(b)] = p.len_q(b);
        lk[size_t(b)] = b % 3 ? 129 + (b * 37) % 64 : 193 + (b * 29) % 64;  // rank 1 idle, or not
      }
      p.cu_seqlens_q = offsets_from_lengths(lq);
      p.cu_seqlens_k = offsets_from_lengths(lk);
      REQUIRE(sm90_bwd_pair_eligible(p));
      DeviceProblem dp(p, make_inputs(p, 134, true), true);
      Sm90Options pair_with, pair_without;
      pair_with.bwd_flags = sm90::kBwdDefaultFlags | sm90::kBwdPair;
      pair_without.bwd_flags = pair_with.bwd_flags & ~sm90::kBwdSkipEmptyHalf;
      CAPTURE(d);
      check_same_backward_bits(pair_with, pair_without, p, dp, ctx);
    }
  }
  TEST_CASE("sm90 backward: staging by stmatrix changes no bit of dQ, dK, dV") {
    // kBwdStmatrix (dV, dK and finished dQ blocks) and kBwdStmatrixDs (each step's dS^T half)
    // store the same bytes to the same swizzled places as the 4-byte stores; a wrong lane address
    // would show as misplaced gradient rows or a dQ product over a scrambled dS. The ordered finish
    // (finished dQ blocks, TMA-stored and row-copied) and the accumulator path over many KV tiles
    // (dK staged in the dS^T buffers); pairs are in the pair test. Explicit flags, whatever the
    // mean Lk; each bit dropped alone and both together.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    const long long both = sm90::kBwdStmatrix | sm90::kBwdStmatrixDs;
    for (long long dropped : {(long long)sm90::kBwdStmatrix, (long long)sm90::kBwdStmatrixDs, both}) {
      CAPTURE(dropped);
      check_dropping_changes_no_bits(sm90::kBwdDefaultFlags, dropped, 113, ctx);
      Sm90Options with, without;
      with.bwd_flags = sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish;
      without.bwd_flags = with.bwd_flags & ~dropped;
      check_same_bits_over_many_tiles(with, without, 114, ctx);
    }
  }
  TEST_CASE("sm90 forward: the halved-P GELU form gives the same O bits as the plain one") {
    // kFwdHalfFold rounds 2 f instead of f and halves O once (activations.cuh act_twice_f): exact
    // in bf16 by construction, so any difference at all is a bug, not rounding.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (Activation act : {kFastGelu, kGeluTanh}) {
      const ProblemDesc p = half_fold_problem(act, 91, 2, 2);
      DeviceProblem dp(p, make_inputs(p, 92, false), false);
      Sm90Options plain;
      plain.fwd_flags = sm90::kFwdDefaultFlags & ~sm90::kFwdHalfFold;
      CAPTURE(activation_name(act));
      check_same_forward_bits(Sm90Options{}, plain, p, dp, ctx);
    }
  }
  TEST_CASE("sm90 forward: a warpgroup whose rows lie past the sequence's end skipping its work changes no bit") {
    // kFwdSkipEmptyHalf: on a last tile of at most 64 rows the second consumer warpgroup issues no
    // GEMM and stores nothing, but still takes its turns and releases its slots. Lengths with a
    // remainder in (0, 64] and in (64, 128] alternate, and there are several tiles per CTA, so idle
    // and busy tiles follow each other across the outer pipeline's prefetch and the K/V reuse of
    // short sequences; cross lengths too. The other warpgroup's rows must come out the same.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (MaskKind mask : {kMaskNone, kMaskCausal})
      for (int d : {64, 128})
        for (bool softmax : {false, true}) {
          ProblemDesc p = half_fold_problem(kFastGelu, 97, 4, 2, 60);
          p.mask = mask;
          p.head_dim = d;
          std::vector<int> lq(size_t(p.batch())), lk(size_t(p.batch()));
          for (int b = 0; b < p.batch(); ++b) {
            lq[size_t(b)] = 128 * (b % 5) + (b % 2 ? 1 + (b * 13) % 64 : 65 + (b * 17) % 64);
            lk[size_t(b)] = b % 3 ? lq[size_t(b)] : 1 + (b * 41) % 300;
          }
          p.cu_seqlens_q = offsets_from_lengths(lq);
          p.cu_seqlens_k = offsets_from_lengths(lk);
          DeviceProblem dp(p, make_inputs(p, 98, false), false);
          Sm90Options with, without;
          with.softmax = without.softmax = softmax;
          without.fwd_flags = sm90::kFwdDefaultFlags & ~sm90::kFwdSkipEmptyHalf;
          CAPTURE(int(mask));
          CAPTURE(d);
          CAPTURE(softmax);
          check_same_forward_bits(with, without, p, dp, ctx);
        }
  }
  TEST_CASE("sm90 forward: a narrow last key block gives the same O bits, and matches the reference") {
    // kFwdNarrowLastBlock: a tile's last key block (not its first) with at most 64 keys runs its
    // QK^T, activation and PV over those 64 keys only. The keys it leaves out lie past the
    // sequence's end, where K and V are zeros and P is act(0) = 0: their products are exact zeros,
    // so O must not change by a bit. Key lengths with a remainder in (0, 64] and (64, 128], one to
    // six blocks (both parities of the whole steps before the narrow one), Lk <= 64 (a narrow
    // first block, which stays whole), self and cross; masks, head dims and both dtypes. Explicit
    // flags, so that the masked D = 128 kernels, which the default leaves whole (they spill with
    // it), are checked too.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (MaskKind mask : {kMaskNone, kMaskCausal, kMaskWindow})
      for (int d : {64, 128})
        for (DType dt : {kBF16, kFP16}) {
          if (dt == kFP16 && mask == kMaskWindow) continue;
          ProblemDesc p = half_fold_problem(kFastGelu, 221, 4, 2, 60);
          p.mask = mask;
          p.head_dim = d;
          p.dtype = dt;
          if (mask == kMaskWindow) p.window_left = 200, p.window_right = 30;
          std::vector<int> lq(size_t(p.batch())), lk(size_t(p.batch()));
          for (int b = 0; b < p.batch(); ++b) {
            lk[size_t(b)] = 128 * (b % 6) + (b % 2 ? 1 + (b * 13) % 64 : 65 + (b * 17) % 64);
            lq[size_t(b)] = b % 3 ? lk[size_t(b)] : 1 + (b * 29) % 300;
          }
          p.cu_seqlens_q = offsets_from_lengths(lq);
          p.cu_seqlens_k = offsets_from_lengths(lk);
          CAPTURE(int(mask));
          CAPTURE(d);
          CAPTURE(int(dt));
          Sm90Options narrow, whole;
          narrow.fwd_flags = sm90::kFwdDefaultFlags;
          whole.fwd_flags = sm90::kFwdDefaultFlags & ~sm90::kFwdNarrowLastBlock;
          DeviceProblem dp(p, make_inputs(p, 222, false), false);
          check_same_forward_bits(narrow, whole, p, dp, ctx);
          auto k = make_sm90_kernel(narrow);
          const CheckOutcome o = run_check(*k, CheckCase{"narrow last key blocks", p, false, 223}, ctx.info());
          INFO(o.line);
          CHECK(o.pass);
        }
  }
  TEST_CASE("sm90 forward: branching before the GEMM batch gives the same O bits") {
    // kFwdWholeBatchBranch (the default from a mean Lk of 192) against the same kernel without it:
    // tiles of 1 to 12 key blocks, both parities of the block count, K/V kept and reloaded.
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (MaskKind mask : {kMaskNone, kMaskCausal})
      for (int d : {64, 128}) {
        ProblemDesc p = half_fold_problem(kFastGelu, 131, 4, 2, 16);
        p.mask = mask;
        p.head_dim = d;
        std::vector<int> lq(size_t(p.batch())), lk(size_t(p.batch()));
        for (int b = 0; b < p.batch(); ++b) {
          lk[size_t(b)] = 128 * (b % 12) + 1 + (b * 37) % 128;  // 1..12 key blocks
          lq[size_t(b)] = b % 3 ? lk[size_t(b)] : 1 + (b * 53) % 400;
        }
        lk[0] = 4000;  // a mean Lk above the limit, so the default takes the switch
        p.cu_seqlens_q = offsets_from_lengths(lq);
        p.cu_seqlens_k = offsets_from_lengths(lk);
        REQUIRE(p.total_k() >= int64_t(sm90::kFwdWholeBatchMinMeanLenK) * p.batch());
        DeviceProblem dp(p, make_inputs(p, 132, false), false);
        Sm90Options without;
        without.fwd_flags_drop = sm90::kFwdWholeBatchBranch;
        CAPTURE(int(mask));
        CAPTURE(d);
        check_same_forward_bits(Sm90Options{}, without, p, dp, ctx);
      }
  }
  TEST_CASE("sm90 forward: O staged by stmatrix gives the same O bits as by 4-byte stores") {
    // kFwdStmatrixO (default) against the same kernel without it: bf16 and fp16, D = 64 and 128,
    // whole O blocks (TMA store) and partial ones (the threads' row copy from the same staging).
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (DType dt : {kBF16, kFP16})
      for (MaskKind mask : {kMaskNone, kMaskCausal})
        for (int d : {64, 128}) {
          ProblemDesc p = half_fold_problem(kFastGelu, 181, 4, 2, 48);
          p.dtype = dt;
          p.mask = mask;
          p.head_dim = d;
          DeviceProblem dp(p, make_inputs(p, 182, false), false);
          Sm90Options without;
          without.fwd_flags_drop = sm90::kFwdStmatrixO;
          CAPTURE(int(dt));
          CAPTURE(int(mask));
          CAPTURE(d);
          check_same_forward_bits(Sm90Options{}, without, p, dp, ctx);
        }
  }
  TEST_CASE("sm90 forward: tile records taken a tile ahead over the lanes give the same O bits") {
    // kFwdRecordLanes (default) against the same kernel loading each record at the tile's top:
    // many tiles per CTA (so every CTA walks several records), K/V-keeping pairs, sequences of one
    // tile, and sequences without keys (tiles that only write zeros).
    Context ctx(0);
    if (ctx.info().arch() != 90) return;
    for (MaskKind mask : {kMaskNone, kMaskCausal})
      for (int d : {64, 128}) {
        ProblemDesc p = half_fold_problem(kFastGelu, 191, 4, 2, 400, 700);
        p.mask = mask;
        p.head_dim = d;
        std::vector<int> lq(size_t(p.batch())), lk(size_t(p.batch()));
        for (int b = 0; b < p.batch(); ++b) {
          lq[size_t(b)] = 1 + (b * 89) % 700;
          lk[size_t(b)] = b % 7 == 3 ? 0 : (b % 2 ? lq[size_t(b)] : 1 + (b * 41) % 300);
        }
        p.cu_seqlens_q = offsets_from_lengths(lq);
        p.cu_seqlens_k = offsets_from_lengths(lk);
        DeviceProblem dp(p, make_inputs(p, 192, false), false);
        Sm90Options without;
        without.fwd_flags_drop = sm90::kFwdRecordLanes;
        CAPTURE(int(mask));
        CAPTURE(d);
        check_same_forward_bits(Sm90Options{}, without, p, dp, ctx);
        auto k = make_sm90_kernel(Sm90Options{});
        const CheckOutcome o = run_check(*k, CheckCase{"records over the lanes", p, false, 193}, ctx.info(), 24);
        INFO(o.line);
        CHECK(o.pass);
      }
  }
  TEST_CASE("sm90 backward with dQ converted by the follower matches the CPU reference") {
    // Explicit flags force the accumulator path and its follower on the check matrix's short
    // cases (the default finishes those in the kernel or in pairs).
    Sm90Options o;
    o.bwd_flags = (sm90::kBwdDefaultFlags & ~sm90::kBwdDqFinish) | sm90::kBwdDqFollow;
    run_cases(true, {"act=fast_gelu", "D=64", "fp16", "mask=causal", "mask=window(37,5)", "G=2", "Lq=1 with an Lk=0",
                     "scales"},
              o);
  }
  TEST_CASE("sm90 backward matches the CPU reference on jagged batches") {
    run_cases(true, {"act=fast_gelu", "act=gelu_poly", "D=64", "fp16", "mask=causal", "G=2", "Lq=1 with an Lk=0",
                     "scales", "KV pairs", "KV pairs G=2 D=64 scales"});
  }
}
