#include "check.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "../kernels/common/activations.cuh"
#include "../verify/compare.h"
#include "../verify/reference.h"
#include "../verify/softmax_reference.h"
#include "device_problem.h"
#include "generator.h"
#include "npy.h"

namespace gdpa {

namespace {

const char* mask_name(MaskKind m) { return m == kMaskCausal ? "causal" : m == kMaskWindow ? "window" : "none"; }

// A small jagged batch whose lengths are not multiples of any tile size, with one empty query
// sequence and one single-token one, so boundary paths run in every case.
ProblemDesc small_problem(uint64_t seed, int batch, int max_len, bool self) {
  BatchShape shape;
  shape.batch = batch;
  shape.max_len_q = max_len;
  shape.sparsity = 0.3;  // lengths spread over [1, 0.6 L]
  ProblemDesc p = make_problem(shape, seed);
  std::vector<int> lq(batch), lk(batch);
  for (int b = 0; b < batch; ++b) {
    lq[b] = p.len_q(b);
    lk[b] = self ? lq[b] : p.len_k(b);
  }
  lq[0] = max_len - 3;  // a long one: several KV and query tiles, not a multiple of 64 or 128
  lk[0] = self ? lq[0] : max_len + 5;
  if (batch > 2) lq[1] = 1;  // a single query row
  if (batch > 3) lq[2] = 0;  // an empty query sequence
  if (self) lk = lq;
  p.cu_seqlens_q = offsets_from_lengths(lq);
  p.cu_seqlens_k = offsets_from_lengths(lk);
  return p;
}

std::vector<float> as_float(const std::vector<uint16_t>& bits, DType t) { return to_float(bits, t); }

struct Judged {
  Verdict v;
  size_t unwritten = 0;
};

Judged judge_tensor(const std::vector<uint16_t>& got_bits, DType t, const std::vector<double>& exact,
                    const std::vector<double>& emul, double factor, size_t row_width,
                    const std::vector<RowRange>* rows) {
  const std::vector<float> got = as_float(got_bits, t);
  Judged j;
  ErrorStats ke, ee;
  if (rows) {
    ke = measure_error_rows(got.data(), exact.data(), row_width, *rows);
    ee = measure_error_rows(emul.data(), exact.data(), row_width, *rows);
    for (const RowRange& r : *rows)
      j.unwritten += count_poison16(got_bits.data() + r.begin * row_width, (r.end - r.begin) * row_width);
  } else {
    ke = measure_error(got.data(), exact.data(), got.size());
    ee = measure_error(emul.data(), exact.data(), got.size());
    j.unwritten = count_poison16(got_bits.data(), got_bits.size());
  }
  j.v = judge(ke, ee, factor);
  if (j.unwritten) {
    j.v.pass = false;
    j.v.detail += " unwritten=" + std::to_string(j.unwritten);
  }
  return j;
}

std::vector<int> sample_of(const ProblemDesc& p, int n) {
  std::vector<int> v;
  const int B = p.batch();
  if (n <= 0 || n >= B) {
    for (int b = 0; b < B; ++b) v.push_back(b);
    return v;
  }
  for (int i = 0; i < n; ++i) v.push_back(int((long long)i * B / n));
  return v;
}

}  // namespace

bool case_matches(const CheckCase& c, const std::string& text) {
  return text.empty() || c.label.find(text) != std::string::npos || describe(c.desc).find(text) != std::string::npos;
}

std::string describe(const ProblemDesc& p) {
  int lq_min = 1 << 30, lq_max = 0, lk_min = 1 << 30, lk_max = 0;
  for (int b = 0; b < p.batch(); ++b) {
    lq_min = std::min(lq_min, p.len_q(b));
    lq_max = std::max(lq_max, p.len_q(b));
    lk_min = std::min(lk_min, p.len_k(b));
    lk_max = std::max(lk_max, p.len_k(b));
  }
  std::ostringstream os;
  os << (p.dtype == kFP16 ? "fp16" : "bf16") << " D" << p.head_dim << " " << activation_name(p.activation) << " "
     << mask_name(p.mask);
  if (p.mask == kMaskWindow) os << "(" << p.window_left << "," << p.window_right << ")";
  os << " Hq" << p.heads_q << "/Hkv" << p.heads_kv << " B" << p.batch() << " Lq[" << lq_min << ".." << lq_max
     << "] Lk[" << lk_min << ".." << lk_max << "]";
  if (p.logit_scale != 1.0f || p.out_scale != 1.0f) os << " scales(" << p.logit_scale << "," << p.out_scale << ")";
  if (!p.kv_index.empty()) os << " kv_index";
  return os.str();
}

std::vector<CheckCase> check_matrix(bool backward, uint64_t seed) {
  std::vector<CheckCase> cases;
  auto add = [&](const std::string& label, ProblemDesc p) {
    CheckCase c;
    c.label = label;
    c.desc = p;
    c.backward = backward;
    c.seed = seed + cases.size() * 7919;
    cases.push_back(c);
  };
  const int B = 6, L = 300;
  auto base = [&](int salt) {
    ProblemDesc p = small_problem(seed + salt, B, L, true);
    p.heads_q = p.heads_kv = 2;
    return p;
  };
  for (int a = 0; a < kNumActivations; ++a) {
    ProblemDesc p = base(a);
    p.activation = Activation(a);
    add(std::string("act=") + activation_name(a), p);
  }
  {
    ProblemDesc p = base(100);
    p.head_dim = 64;
    add("D=64", p);
    p.activation = kSilu;
    add("D=64 silu", p);
  }
  {
    ProblemDesc p = base(101);
    p.dtype = kFP16;
    add("fp16", p);
    p.head_dim = 64;
    p.activation = kGeluPoly;
    add("fp16 D=64 gelu_poly", p);
  }
  {
    ProblemDesc p = base(102);
    p.mask = kMaskCausal;
    add("mask=causal", p);
    p.activation = kSilu;
    p.head_dim = 64;
    add("mask=causal D=64 silu", p);
  }
  {
    ProblemDesc p = base(103);
    p.mask = kMaskWindow;
    p.window_left = 37;
    p.window_right = 5;
    add("mask=window(37,5)", p);
    p.window_left = -1;
    p.window_right = 70;
    add("mask=window(inf,70)", p);
  }
  {
    ProblemDesc p = base(104);
    p.heads_q = 4;
    p.heads_kv = 2;
    add("G=2", p);
    p.heads_q = 4;
    p.heads_kv = 1;
    add("MQA G=4", p);
  }
  {
    ProblemDesc p = small_problem(seed + 105, B, L, false);  // cross: Lk != Lq, not tile multiples
    p.heads_q = p.heads_kv = 2;
    add("cross Lk!=Lq", p);
    p.mask = kMaskCausal;
    add("cross causal", p);
  }
  {
    ProblemDesc p = base(106);
    std::vector<int> lq(B), lk(B);
    for (int b = 0; b < B; ++b) {
      lq[b] = 1;  // decode-like: one query row per sequence
      lk[b] = 17 + 61 * b;
    }
    lk[3] = 0;  // and an empty KV sequence: its O rows must be zeros
    p.cu_seqlens_q = offsets_from_lengths(lq);
    p.cu_seqlens_k = offsets_from_lengths(lk);
    add("Lq=1 with an Lk=0", p);
  }
  {
    ProblemDesc p = base(109);
    // Lengths on both sides of every tile edge (64-row consumer halves, 128-row tiles, 128-key
    // blocks and their 64-key halves), causal so the diagonal crosses the same edges.
    const std::vector<int> len = {63, 64, 65, 128, 129, 192};
    p.cu_seqlens_q = p.cu_seqlens_k = offsets_from_lengths(len);
    add("tile edges", p);
    p.mask = kMaskCausal;
    add("tile edges causal", p);
  }
  {
    ProblemDesc p = base(110);
    // Every sequence with two KV tiles (128 < Lk <= 256) and a mean Lq of at least kBwdPairMinMeanLenQ:
    // the backward runs its KV tiles in cluster pairs (kBwdPair). Query lengths off the 64-row
    // step edges, one empty, one single row.
    const std::vector<int> lq = {700, 0, 1, 450, 65, 1100}, lk = {256, 129, 200, 255, 130, 192};
    p.cu_seqlens_q = offsets_from_lengths(lq);
    p.cu_seqlens_k = offsets_from_lengths(lk);
    add("KV pairs", p);
    p.heads_q = 4;
    p.heads_kv = 2;
    p.logit_scale = 0.5f;
    p.out_scale = 1.25f;
    p.head_dim = 64;
    add("KV pairs G=2 D=64 scales", p);
  }
  {
    ProblemDesc p = base(107);
    p.logit_scale = 0.35f;
    p.out_scale = 1.75f;
    add("scales", p);
  }
  if (!backward) {
    ProblemDesc p = base(108);
    // Four query sequences share two KV sequences.
    std::vector<int> lq = {130, 1, 257, 64}, lk = {200, 129};
    p.cu_seqlens_q = offsets_from_lengths(lq);
    p.cu_seqlens_k = offsets_from_lengths(lk);
    p.kv_index = {1, 0, 0, 1};
    add("kv_index", p);
  }
  return cases;
}

CheckOutcome run_check(AttentionKernel& kernel, const CheckCase& c, const DeviceInfo& dev, int sample_batches,
                       const std::string& save_dir) {
  CheckOutcome out;
  const ProblemDesc& p = c.desc;
  const std::string what = (c.backward ? "bwd " : "fwd ") + kernel.name() + " " + c.label + " [" + describe(p) + "]";
  std::string why;
  if (!kernel.supports(p, dev.arch(), c.backward, &why)) {
    out.skipped = true;
    out.line = "SKIP " + what + ": " + why;
    return out;
  }
  validate(p, -1, -1, c.backward);
  const HostInputs in = make_inputs(p, c.seed, c.backward);
  kernel.prepare(p, dev, c.backward);
  DeviceProblem dp(p, in, c.backward);
  Stream stream;
  dp.poison_outputs(stream.get());
  kernel.forward(dp.view(), stream.get());
  stream.synchronize();
  std::vector<uint16_t> o_bits;
  dp.download_out(o_bits);
  std::vector<uint16_t> dq_bits, dk_bits, dv_bits;
  if (c.backward) {
    dp.poison_outputs(stream.get());
    kernel.backward(dp.view(), stream.get());
    stream.synchronize();
    dp.download_grads(dq_bits, dk_bits, dv_bits);
  }

  const std::vector<float> q = as_float(in.q, p.dtype), k = as_float(in.k, p.dtype), v = as_float(in.v, p.dtype);
  const std::vector<int> batches = sample_of(p, sample_batches);
  const std::vector<int>* only = sample_batches > 0 ? &batches : nullptr;
  const std::vector<RowRange> qrows = query_rows_of(p, batches), krows = key_rows_of(p, batches);
  const size_t nq = size_t(p.total_q()) * p.q_row(), nk = size_t(p.total_k()) * p.k_row();

  std::ostringstream detail;
  bool pass = true;
  const RefMode emulate = kernel.rounds_scores() ? RefMode::kEmulateUnfused : RefMode::kEmulateKernel;
  if (!c.backward) {
    std::vector<double> exact(nq, 0.0), emul(nq, 0.0);
    if (kernel.is_softmax()) {
      reference_softmax_forward(p, q.data(), k.data(), v.data(), RefMode::kExact, exact.data(), only);
      reference_softmax_forward(p, q.data(), k.data(), v.data(), RefMode::kEmulateKernel, emul.data(), only);
    } else {
      reference_forward(p, q.data(), k.data(), v.data(), RefMode::kExact, exact.data(), only);
      reference_forward(p, q.data(), k.data(), v.data(), emulate, emul.data(), only);
    }
    const Judged j = judge_tensor(o_bits, p.dtype, exact, emul, kForwardErrorFactor, p.q_row(), &qrows);
    pass = j.v.pass;
    detail << "O: " << j.v.detail;
  } else {
    const std::vector<float> dout = as_float(in.dout, p.dtype);
    std::vector<double> dq(nq, 0.0), dk(nk, 0.0), dv(nk, 0.0), eq(nq, 0.0), ek(nk, 0.0), ev(nk, 0.0);
    reference_backward(p, q.data(), k.data(), v.data(), dout.data(), RefMode::kExact, dq.data(), dk.data(),
                       dv.data(), only);
    reference_backward(p, q.data(), k.data(), v.data(), dout.data(), emulate, eq.data(),
                       ek.data(), ev.data(), only);
    const Judged jq = judge_tensor(dq_bits, p.dtype, dq, eq, kBackwardErrorFactor, p.q_row(), &qrows);
    const Judged jk = judge_tensor(dk_bits, p.dtype, dk, ek, kBackwardErrorFactor, p.k_row(), &krows);
    const Judged jv = judge_tensor(dv_bits, p.dtype, dv, ev, kBackwardErrorFactor, p.k_row(), &krows);
    pass = jq.v.pass && jk.v.pass && jv.v.pass;
    detail << "dQ: " << jq.v.detail << " | dK: " << jk.v.detail << " | dV: " << jv.v.detail;
  }
  if (!save_dir.empty()) {
    const std::string pre = save_dir + "/" + kernel.name() + (c.backward ? "_bwd_" : "_fwd_");
    const std::vector<int64_t> qshape = {p.total_q(), p.heads_q, p.head_dim};
    const std::vector<int64_t> kshape = {p.total_k(), p.heads_kv, p.head_dim};
    save_npy(pre + "q.npy", in.q.data(), qshape, p.dtype);
    save_npy(pre + "k.npy", in.k.data(), kshape, p.dtype);
    save_npy(pre + "v.npy", in.v.data(), kshape, p.dtype);
    save_npy(pre + "cu_seqlens_q.npy", p.cu_seqlens_q.data(), {int64_t(p.cu_seqlens_q.size())});
    save_npy(pre + "cu_seqlens_k.npy", p.cu_seqlens_k.data(), {int64_t(p.cu_seqlens_k.size())});
    save_npy(pre + "o.npy", o_bits.data(), qshape, p.dtype);
    if (c.backward) {
      save_npy(pre + "do.npy", in.dout.data(), qshape, p.dtype);
      save_npy(pre + "dq.npy", dq_bits.data(), qshape, p.dtype);
      save_npy(pre + "dk.npy", dk_bits.data(), kshape, p.dtype);
      save_npy(pre + "dv.npy", dv_bits.data(), kshape, p.dtype);
    }
  }
  out.pass = pass;
  out.line = std::string(pass ? "PASS " : "FAIL ") + what + " " + detail.str();
  return out;
}

}  // namespace gdpa
