#include "device_problem.h"

#include "device_fill.h"

namespace gdpa {

namespace {
size_t bytes16(size_t elements) { return elements * sizeof(uint16_t); }
// cuMemAlloc refuses zero bytes; keep a valid pointer for empty tensors (Lq = 0 everywhere).
size_t at_least_16(size_t b) { return b < 16 ? 16 : b; }
}  // namespace

void DeviceProblem::allocate(bool backward) {
  const ProblemDesc& p = desc_;
  const size_t nq = size_t(p.total_q()) * p.q_row();
  const size_t nk = size_t(p.total_k()) * p.k_row();
  q_ = DeviceBuffer(at_least_16(bytes16(nq)));
  k_ = DeviceBuffer(at_least_16(bytes16(nk)));
  v_ = DeviceBuffer(at_least_16(bytes16(nk)));
  out_ = DeviceBuffer(at_least_16(bytes16(nq)));
  if (backward) {
    dout_ = DeviceBuffer(at_least_16(bytes16(nq)));
    dq_ = DeviceBuffer(at_least_16(bytes16(nq)));
    dk_ = DeviceBuffer(at_least_16(bytes16(nk)));
    dv_ = DeviceBuffer(at_least_16(bytes16(nk)));
  }
  cu_q_ = DeviceBuffer(p.cu_seqlens_q.size() * sizeof(int));
  cu_q_.upload(p.cu_seqlens_q);
  cu_k_ = DeviceBuffer(p.cu_seqlens_k.size() * sizeof(int));
  cu_k_.upload(p.cu_seqlens_k);
  if (!p.kv_index.empty()) {
    kv_index_ = DeviceBuffer(p.kv_index.size() * sizeof(int));
    kv_index_.upload(p.kv_index);
  }
}

DeviceProblem::DeviceProblem(const ProblemDesc& p, const HostInputs& in, bool backward) : desc_(p) {
  allocate(backward);
  const size_t nq = size_t(p.total_q()) * p.q_row();
  const size_t nk = size_t(p.total_k()) * p.k_row();
  if (nq) q_.upload(in.q.data(), bytes16(nq));
  if (nk) {
    k_.upload(in.k.data(), bytes16(nk));
    v_.upload(in.v.data(), bytes16(nk));
  }
  if (backward && nq) dout_.upload(in.dout.data(), bytes16(nq));
}

DeviceProblem::DeviceProblem(const ProblemDesc& p, bool backward, uint64_t seed, int arch, CUstream s) : desc_(p) {
  allocate(backward);
  const size_t nq = size_t(p.total_q()) * p.q_row();
  const size_t nk = size_t(p.total_k()) * p.k_row();
  const double sqk = qk_stddev(p.head_dim);
  device_fill_normal(q_.ptr(), nq, sqk, p.dtype, seed * 4 + 0, s, arch);
  device_fill_normal(k_.ptr(), nk, sqk, p.dtype, seed * 4 + 1, s, arch);
  device_fill_normal(v_.ptr(), nk, 1.0, p.dtype, seed * 4 + 2, s, arch);
  if (backward) device_fill_normal(dout_.ptr(), nq, 1.0, p.dtype, seed * 4 + 3, s, arch);
}

DeviceTensors DeviceProblem::view() const {
  DeviceTensors t;
  t.q = q_.ptr();
  t.k = k_.ptr();
  t.v = v_.ptr();
  t.dout = dout_.ptr();
  t.out = out_.ptr();
  t.dq = dq_.ptr();
  t.dk = dk_.ptr();
  t.dv = dv_.ptr();
  t.cu_seqlens_q = cu_q_.ptr();
  t.cu_seqlens_k = cu_k_.ptr();
  t.kv_index = kv_index_.ptr();
  return t;
}

void DeviceProblem::poison_outputs(CUstream s) {
  for (DeviceBuffer* b : {&out_, &dq_, &dk_, &dv_})
    if (b->bytes()) b->fill_u8(0xFF, s);
}

void DeviceProblem::download_out(std::vector<uint16_t>& o) const {
  o.resize(size_t(desc_.total_q()) * desc_.q_row());
  if (!o.empty()) out_.download(o.data(), bytes16(o.size()));
}

void DeviceProblem::download_grads(std::vector<uint16_t>& dq, std::vector<uint16_t>& dk,
                                   std::vector<uint16_t>& dv) const {
  dq.resize(size_t(desc_.total_q()) * desc_.q_row());
  dk.resize(size_t(desc_.total_k()) * desc_.k_row());
  dv.resize(dk.size());
  if (!dq.empty()) dq_.download(dq.data(), bytes16(dq.size()));
  if (!dk.empty()) {
    dk_.download(dk.data(), bytes16(dk.size()));
    dv_.download(dv.data(), bytes16(dv.size()));
  }
}

size_t DeviceProblem::input_bytes() const { return q_.bytes() + k_.bytes() + v_.bytes(); }

GdpaParams make_params(const ProblemDesc& p, const DeviceTensors& t) {
  GdpaParams g{};
  g.q = reinterpret_cast<const void*>(t.q);
  g.k = reinterpret_cast<const void*>(t.k);
  g.v = reinterpret_cast<const void*>(t.v);
  g.dout = reinterpret_cast<const void*>(t.dout);
  g.out = reinterpret_cast<void*>(t.out);
  g.dq = reinterpret_cast<void*>(t.dq);
  g.dk = reinterpret_cast<void*>(t.dk);
  g.dv = reinterpret_cast<void*>(t.dv);
  g.cu_seqlens_q = reinterpret_cast<const int*>(t.cu_seqlens_q);
  g.cu_seqlens_k = reinterpret_cast<const int*>(t.cu_seqlens_k);
  g.kv_index = reinterpret_cast<const int*>(t.kv_index);
  g.batch = p.batch();
  g.heads_q = p.heads_q;
  g.heads_kv = p.heads_kv;
  g.group = p.group();
  g.head_dim = p.head_dim;
  g.total_q = p.total_q();
  g.total_k = p.total_k();
  g.max_seqlen_q = p.max_len_q();
  g.max_seqlen_k = p.max_len_k();
  g.logit_scale = p.logit_scale;
  g.out_scale = p.out_scale;
  g.window_left = p.window_left;
  g.window_right = p.window_right;
  return g;
}

}  // namespace gdpa
