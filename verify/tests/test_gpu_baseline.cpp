// test_gpu_baseline.cpp — the baseline kernels and the unfused cuBLAS path against the CPU
// reference on small jagged problems, plus sanity bounds on the measured ceilings (needs a GPU).
//
// Every run starts from fresh random inputs and outputs poisoned with 0xFFFF (a NaN in bf16 and
// fp16), so a row the kernel forgot to write is caught both by the poison count and by judge().
// The shapes hit every awkward length: 0, 1, a tile minus one, a tile, a tile plus one, several
// tiles, cross-attention with Lk != Lq, Lk = 0, GQA and MQA, shared KV (kv_index).
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../host/baseline.h"
#include "../../host/ceilings.h"
#include "../../host/device_problem.h"
#include "../../host/driver.h"
#include "../../host/generator.h"
#include "../../host/unfused_cublas.h"
#include "jagged_problem.h"
#include "../compare.h"
#include "../reference.h"

using namespace gdpa;

namespace {

struct Case {
  std::string label;
  ProblemDesc p;
};

Case make_case(const std::string& label, const std::vector<int>& lq, const std::vector<int>& lk,
               int hq, int hkv, int dim, DType dtype, Activation act, MaskKind mask = kMaskNone,
               int window_left = -1, int window_right = -1) {
  Case c;
  c.label = label;
  c.p.cu_seqlens_q = offsets_from_lengths(lq);
  c.p.cu_seqlens_k = offsets_from_lengths(lk);
  c.p.heads_q = hq;
  c.p.heads_kv = hkv;
  c.p.head_dim = dim;
  c.p.dtype = dtype;
  c.p.activation = act;
  c.p.mask = mask;
  c.p.window_left = window_left;
  c.p.window_right = window_right;
  return c;
}

// Shapes valid for both directions (no kv_index). Together they use every activation, every mask,
// both dtypes, both head dims and both scales.
std::vector<Case> common_cases() {
  const std::vector<int> awkward = {1, 63, 64, 65, 130, 0, 200};
  std::vector<Case> cs = {
      make_case("mha bf16 d128 fast_gelu", awkward, awkward, 4, 4, 128, kBF16, kFastGelu),
      make_case("gqa fp16 d64 gelu causal", {17, 64, 129, 0, 3}, {17, 64, 129, 0, 3}, 4, 2, 64, kFP16,
                kGelu, kMaskCausal),
      make_case("mqa bf16 d128 silu window(32,8)", {100, 200, 5}, {100, 200, 5}, 4, 1, 128, kBF16,
                kSilu, kMaskWindow, 32, 8),
      // Lq < Lk, Lq > Lk (bottom-right diagonal: early query rows see nothing) and Lk = 0.
      make_case("cross bf16 d64 relu_square causal", {150, 10, 64}, {70, 256, 0}, 2, 2, 64, kBF16,
                kReluSquare, kMaskCausal),
      make_case("cross fp16 d128 gelu_tanh", {33, 128, 1}, {256, 7, 90}, 2, 1, 128, kFP16, kGeluTanh),
      make_case("fp16 d64 gelu_poly window(-1,16)", {80, 150}, {80, 150}, 2, 2, 64, kFP16, kGeluPoly,
                kMaskWindow, -1, 16),
      make_case("bf16 d128 identity window(40,-1)", {96, 160}, {96, 160}, 2, 2, 128, kBF16,
                kIdentity, kMaskWindow, 40, -1),
      make_case("bf16 d64 fast_gelu_bf16", {70, 129}, {70, 129}, 2, 2, 64, kBF16, kFastGeluBf16),
      make_case("fp16 d128 gelu_taylor6 causal", {65, 31}, {65, 31}, 2, 2, 128, kFP16, kGeluTaylor6,
                kMaskCausal),
      make_case("bf16 d64 relu", {90, 40}, {90, 40}, 2, 2, 64, kBF16, kRelu),
      make_case("fp16 d64 leaky_relu", {90, 40}, {50, 140}, 2, 2, 64, kFP16, kLeakyRelu),
      make_case("bf16 d128 fast_silu gqa", {77, 140}, {77, 140}, 4, 2, 128, kBF16, kFastSilu),
      make_case("fp16 d128 hardswish causal", {100, 64}, {100, 64}, 2, 2, 128, kFP16, kHardswish,
                kMaskCausal),
  };
  // Non-default scales: logit_scale shifts the activation's operating point, out_scale scales P.
  cs[1].p.logit_scale = 0.7f;
  cs[1].p.out_scale = 1.5f;
  cs[5].p.logit_scale = 2.0f;
  cs[5].p.out_scale = 0.25f;
  cs[11].p.out_scale = -0.5f;
  return cs;
}

// Forward-only shapes: query sequences sharing KV sequences.
std::vector<Case> forward_only_cases() {
  Case c = make_case("kv_index bf16 d128 gelu causal", {40, 130, 64, 0}, {}, 4, 2, 128, kBF16,
                     kGelu, kMaskCausal);
  c.p.cu_seqlens_k = offsets_from_lengths({150, 64});  // two KV sequences for four query sequences
  c.p.kv_index = {1, 0, 0, 1};
  Case d = make_case("kv_index fp16 d64 silu", {5, 70, 200}, {}, 2, 2, 64, kFP16, kSilu);
  d.p.cu_seqlens_k = offsets_from_lengths({0, 129});  // one empty KV sequence: those O rows are zeros
  d.p.kv_index = {0, 1, 1};
  return {c, d};
}

struct Device {
  Context ctx{0};
  Stream stream;
};

std::vector<float> widen(const std::vector<uint16_t>& bits, DType dtype) { return to_float(bits, dtype); }

// kernel vs exact, judged against emulation vs exact; also no element may still hold the poison.
void judge_output(const std::string& what, const std::vector<uint16_t>& bits, DType dtype,
                  const std::vector<double>& exact, const std::vector<double>& emulated, double factor) {
  REQUIRE(bits.size() == exact.size());
  CHECK_MESSAGE(count_poison16(bits.data(), bits.size()) == 0, what, ": unwritten elements");
  const std::vector<float> got = widen(bits, dtype);
  const ErrorStats kernel = measure_error(got.data(), exact.data(), exact.size());
  const ErrorStats emul = measure_error(emulated.data(), exact.data(), exact.size());
  const Verdict v = judge(kernel, emul, factor);
  CHECK_MESSAGE(v.pass, what, ": ", v.detail);
}

void check_forward(Device& dev, AttentionKernel& kernel, const Case& c, uint64_t seed, double factor) {
  const ProblemDesc& p = c.p;
  const std::string what = kernel.name() + " fwd " + c.label;
  std::string why;
  REQUIRE_MESSAGE(kernel.supports(p, dev.ctx.info().arch(), false, &why), what, ": ", why);
  const HostInputs in = make_inputs(p, seed, false);
  kernel.prepare(p, dev.ctx.info(), false);
  DeviceProblem dp(p, in, false);
  dp.poison_outputs(dev.stream.get());
  kernel.forward(dp.view(), dev.stream.get());
  dev.stream.synchronize();
  std::vector<uint16_t> o;
  dp.download_out(o);

  const std::vector<float> q = widen(in.q, p.dtype), k = widen(in.k, p.dtype), v = widen(in.v, p.dtype);
  const size_t n = size_t(p.total_q()) * p.q_row();
  std::vector<double> exact(n, 0.0), emul(n, 0.0);
  reference_forward(p, q.data(), k.data(), v.data(), RefMode::kExact, exact.data());
  const RefMode emulate = kernel.rounds_scores() ? RefMode::kEmulateUnfused : RefMode::kEmulateKernel;
  reference_forward(p, q.data(), k.data(), v.data(), emulate, emul.data());
  judge_output(what + " O", o, p.dtype, exact, emul, factor);
}

struct Grads {
  std::vector<uint16_t> dq, dk, dv;
};

Grads run_backward(Device& dev, AttentionKernel& kernel, const ProblemDesc& p, const HostInputs& in) {
  kernel.prepare(p, dev.ctx.info(), true);
  DeviceProblem dp(p, in, true);
  dp.poison_outputs(dev.stream.get());
  kernel.backward(dp.view(), dev.stream.get());
  dev.stream.synchronize();
  Grads g;
  dp.download_grads(g.dq, g.dk, g.dv);
  return g;
}

void check_backward(Device& dev, AttentionKernel& kernel, const Case& c, uint64_t seed, double factor) {
  const ProblemDesc& p = c.p;
  const std::string what = kernel.name() + " bwd " + c.label;
  std::string why;
  REQUIRE_MESSAGE(kernel.supports(p, dev.ctx.info().arch(), true, &why), what, ": ", why);
  const HostInputs in = make_inputs(p, seed, true);
  const Grads g = run_backward(dev, kernel, p, in);

  const std::vector<float> q = widen(in.q, p.dtype), k = widen(in.k, p.dtype),
                           v = widen(in.v, p.dtype), dout = widen(in.dout, p.dtype);
  const size_t nq = size_t(p.total_q()) * p.q_row(), nk = size_t(p.total_k()) * p.k_row();
  std::vector<double> dq(nq, 0.0), dk(nk, 0.0), dv(nk, 0.0), eq(nq, 0.0), ek(nk, 0.0), ev(nk, 0.0);
  reference_backward(p, q.data(), k.data(), v.data(), dout.data(), RefMode::kExact, dq.data(),
                     dk.data(), dv.data());
  const RefMode emulate = kernel.rounds_scores() ? RefMode::kEmulateUnfused : RefMode::kEmulateKernel;
  reference_backward(p, q.data(), k.data(), v.data(), dout.data(), emulate, eq.data(), ek.data(), ev.data());
  judge_output(what + " dQ", g.dq, p.dtype, dq, eq, factor);
  judge_output(what + " dK", g.dk, p.dtype, dk, ek, factor);
  judge_output(what + " dV", g.dv, p.dtype, dv, ev, factor);
}

// The unfused path stores S (and dP) in the io dtype between its GEMMs, as torch.bmm does; it is
// judged against a CPU run that emulates exactly that extra rounding (RefMode::kEmulateUnfused),
// with the same factors as the fused kernels, on every activation.

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("baseline forward matches the CPU reference") {
    Device dev;
    auto kernel = make_baseline_kernel();
    uint64_t seed = 100;
    for (const Case& c : common_cases()) check_forward(dev, *kernel, c, seed++, kForwardErrorFactor);
    for (const Case& c : forward_only_cases()) check_forward(dev, *kernel, c, seed++, kForwardErrorFactor);
  }

  TEST_CASE("baseline backward matches the CPU reference") {
    Device dev;
    auto kernel = make_baseline_kernel();
    uint64_t seed = 200;
    for (const Case& c : common_cases()) check_backward(dev, *kernel, c, seed++, kBackwardErrorFactor);
  }

  TEST_CASE("baseline backward is bit-identical run to run") {
    Device dev;
    auto kernel = make_baseline_kernel();
    const Case c = common_cases()[2];  // MQA: four query heads summed into each dK/dV row
    const HostInputs in = make_inputs(c.p, 7, true);
    const Grads a = run_backward(dev, *kernel, c.p, in);
    const Grads b = run_backward(dev, *kernel, c.p, in);
    CHECK(a.dq == b.dq);
    CHECK(a.dk == b.dk);
    CHECK(a.dv == b.dv);
  }

  TEST_CASE("baseline forward on a longer jagged batch, sampled sequences") {
    // Several 64-row tiles per sequence and random lengths; the reference checks three sequences.
    Device dev;
    auto kernel = make_baseline_kernel();
    ProblemDesc p = jagged_problem(12, 700, 11, 4, 4);
    p.head_dim = 128;
    p.activation = kFastGelu;
    const HostInputs in = make_inputs(p, 12, false);
    kernel->prepare(p, dev.ctx.info(), false);
    DeviceProblem dp(p, in, false);
    dp.poison_outputs(dev.stream.get());
    kernel->forward(dp.view(), dev.stream.get());
    dev.stream.synchronize();
    std::vector<uint16_t> o;
    dp.download_out(o);
    CHECK(count_poison16(o.data(), o.size()) == 0);

    const std::vector<int> sample = {0, 5, 11};
    const std::vector<float> q = widen(in.q, p.dtype), k = widen(in.k, p.dtype), v = widen(in.v, p.dtype);
    const size_t n = size_t(p.total_q()) * p.q_row();
    std::vector<double> exact(n, 0.0), emul(n, 0.0);
    reference_forward(p, q.data(), k.data(), v.data(), RefMode::kExact, exact.data(), &sample);
    reference_forward(p, q.data(), k.data(), v.data(), RefMode::kEmulateKernel, emul.data(), &sample);
    const std::vector<RowRange> rows = query_rows_of(p, sample);
    const std::vector<float> got = widen(o, p.dtype);
    const ErrorStats ek = measure_error_rows(got.data(), exact.data(), size_t(p.q_row()), rows);
    const ErrorStats ee = measure_error_rows(emul.data(), exact.data(), size_t(p.q_row()), rows);
    const Verdict verdict = judge(ek, ee, kForwardErrorFactor);
    CHECK_MESSAGE(verdict.pass, verdict.detail);
    CHECK(ek.count > 0);
  }

  TEST_CASE("unfused cuBLAS forward matches the CPU reference") {
    Device dev;
    auto kernel = make_unfused_cublas_kernel();
    auto one_per_chunk = make_unfused_cublas_kernel(1);  // budget of 1 byte: one sequence per chunk
    uint64_t seed = 300;
    const double factor = kForwardErrorFactor;
    for (const Case& c : common_cases())
      check_forward(dev, *kernel, c, seed++, factor);
    for (const Case& c : forward_only_cases()) check_forward(dev, *kernel, c, seed++, factor);
    check_forward(dev, *one_per_chunk, common_cases()[0], seed++, factor);
    check_forward(dev, *one_per_chunk, forward_only_cases()[0], seed++, factor);
  }

  TEST_CASE("unfused cuBLAS backward matches the CPU reference") {
    Device dev;
    auto kernel = make_unfused_cublas_kernel();
    auto one_per_chunk = make_unfused_cublas_kernel(1);
    uint64_t seed = 400;
    const double factor = kBackwardErrorFactor;
    for (const Case& c : common_cases())
      check_backward(dev, *kernel, c, seed++, factor);
    check_backward(dev, *one_per_chunk, common_cases()[1], seed++, factor);
  }

  TEST_CASE("measured ceilings are plausible") {
    Device dev;
    // Small sizes keep the test short; the bounds only catch unit and timing mistakes.
    const CeilingStats gemm = measure_gemm_ceiling(2048, 5, dev.stream.get(), kBF16, 0);
    CHECK(gemm.reps == 5);
    CHECK(gemm.min <= gemm.median);
    CHECK(gemm.median <= gemm.max);
    CHECK(gemm.median > 5.0);      // TFLOP/s: any sm_80+ tensor-core GPU does far more
    CHECK(gemm.max < 20000.0);     // and none does 20 PFLOP/s dense
    const CeilingStats copy = measure_copy_bandwidth(size_t(256) << 20, 5, dev.stream.get());
    CHECK(copy.median > 50.0);     // GB/s
    CHECK(copy.max < 50000.0);
    CHECK(copy.min <= copy.median);
  }
}
