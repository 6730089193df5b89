// baseline.cpp — host side of the baseline kernels: variant choice, compile and load, launch.
//
// Every launch is a flat 1-D grid over (tile, head, sequence) with the tile index innermost
// (decoded in the kernels); CTAs whose tile starts past their sequence's end exit at once, so the
// grid is sized by the longest sequence and the kernels need no tile list.
#include "baseline.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "../kernels/baseline/layout.h"
#include "device_problem.h"

namespace gdpa {

namespace {

constexpr const char* kFwdFile = "kernels/baseline/gdpa_fwd.cu";
constexpr const char* kBwdFile = "kernels/baseline/gdpa_bwd.cu";

// "<dtype,head_dim,activation,mask>": the template arguments every baseline kernel takes.
std::string variant_args(const ProblemDesc& p) {
  return "<" + std::to_string(int(p.dtype)) + "," + std::to_string(p.head_dim) + "," +
         std::to_string(int(p.activation)) + "," + std::to_string(int(p.mask)) + ">";
}

size_t smem_needed(const ProblemDesc& p, bool backward) {
  const int fwd = baseline::fwd_smem_bytes(p.head_dim);
  const int bwd = baseline::bwd_smem_bytes(p.head_dim);
  return size_t(backward && bwd > fwd ? bwd : fwd);
}

// Flat grid size: tiles of the longest sequence x heads x sequences (fits cuLaunch's 2^31 - 1).
long long grid_blocks(int max_len, int heads, int batch) {
  return (long long)baseline::tiles_for(max_len) * heads * batch;
}

class BaselineKernel final : public AttentionKernel {
 public:
  std::string name() const override { return "baseline"; }

  std::vector<KernelSource> sources(const ProblemDesc& p, bool backward) const override {
    return baseline_kernel_sources(p, backward);
  }

  bool supports(const ProblemDesc& p, int arch, bool backward, std::string* why) const override {
    auto no = [&](const std::string& reason) {
      if (why) *why = reason;
      return false;
    };
    if (arch < 80) return no("the baseline kernels need sm_80 or newer");
    if (p.head_dim != 64 && p.head_dim != 128)
      return no("head_dim " + std::to_string(p.head_dim) + " (baseline: 64 or 128)");
    if (p.dtype != kBF16 && p.dtype != kFP16) return no("dtype must be bf16 or fp16");
    if (backward && !p.kv_index.empty()) return no("kv_index is forward-only (spec 4)");
    const size_t smem = smem_needed(p, backward);
    if (smem > size_t(baseline_max_smem_optin(arch)))
      return no("needs " + std::to_string(smem) + " bytes of shared memory per block; sm_" +
                std::to_string(arch) + " allows " + std::to_string(baseline_max_smem_optin(arch)));
    const long long blocks = grid_blocks(std::max(p.max_len_q(), p.max_len_k()),
                                         std::max(p.heads_q, p.heads_kv), p.batch());
    if (blocks > 0x7fffffffLL) return no("grid of " + std::to_string(blocks) + " blocks is too large");
    return true;
  }

  void prepare(const ProblemDesc& p, const DeviceInfo& dev, bool backward) override {
    validate(p, -1, -1, backward);
    std::string why;
    if (!supports(p, dev.arch(), backward, &why)) throw std::runtime_error("baseline: " + why);
    const size_t smem = smem_needed(p, backward);
    if (dev.max_smem_optin > 0 && smem > size_t(dev.max_smem_optin))
      throw std::runtime_error("baseline: needs " + std::to_string(smem) +
                               " bytes of shared memory per block; " + dev.name + " allows " +
                               std::to_string(dev.max_smem_optin));
    for (const KernelSource& src : baseline_kernel_sources(p, backward)) {
      const std::string key = src.name_expression + "@" + std::to_string(dev.arch());
      if (modules_.count(key)) continue;  // compiled and loaded for an earlier problem
      const CompiledKernel k = compile_kernel(src, dev.arch());
      modules_[key] = std::make_unique<Module>(k.cubin.data(), k.lowered_name);
    }
    const std::string args = variant_args(p);
    const std::string arch = "@" + std::to_string(dev.arch());
    fwd_ = modules_.at("gdpa::baseline_fwd" + args + arch).get();
    dkdv_ = backward ? modules_.at("gdpa::baseline_bwd_dkdv" + args + arch).get() : nullptr;
    dq_ = backward ? modules_.at("gdpa::baseline_bwd_dq" + args + arch).get() : nullptr;
    desc_ = p;
    max_len_q_ = p.max_len_q();
    max_len_k_ = p.max_len_k();
  }

  void forward(const DeviceTensors& t, CUstream stream) override {
    if (!fwd_) throw std::logic_error("baseline: forward() before prepare()");
    GdpaParams params = make_params(desc_, t);
    const long long blocks = grid_blocks(max_len_q_, desc_.heads_q, desc_.batch());
    if (blocks == 0) return;  // no query rows: nothing to write
    launch_flat(fwd_, blocks, baseline::fwd_smem_bytes(desc_.head_dim), stream, &params);
  }

  void backward(const DeviceTensors& t, CUstream stream) override {
    if (!dkdv_ || !dq_) throw std::logic_error("baseline: backward() before prepare(backward=true)");
    GdpaParams params = make_params(desc_, t);
    const int smem = baseline::bwd_smem_bytes(desc_.head_dim);
    // dK/dV first, then dQ: independent outputs, both complete when the stream reaches the end.
    const long long kv_blocks = grid_blocks(max_len_k_, desc_.heads_kv, desc_.batch());
    if (kv_blocks > 0) launch_flat(dkdv_, kv_blocks, smem, stream, &params);
    const long long q_blocks = grid_blocks(max_len_q_, desc_.heads_q, desc_.batch());
    if (q_blocks > 0) launch_flat(dq_, q_blocks, smem, stream, &params);
  }

 private:
  static void launch_flat(const Module* m, long long blocks, int smem, CUstream stream,
                          GdpaParams* params) {
    LaunchShape shape;
    shape.grid[0] = unsigned(blocks);
    shape.block[0] = baseline::kThreads;
    shape.dynamic_smem = size_t(smem);
    void* args[] = {params};
    launch(m->function(), shape, stream, args);
  }

  std::map<std::string, std::unique_ptr<Module>> modules_;  // name expression @ arch -> module
  const Module* fwd_ = nullptr;
  const Module* dkdv_ = nullptr;
  const Module* dq_ = nullptr;
  ProblemDesc desc_;
  int max_len_q_ = 0, max_len_k_ = 0;
};

}  // namespace

std::vector<KernelSource> baseline_kernel_sources(const ProblemDesc& p, bool backward) {
  const std::string args = variant_args(p);
  std::vector<KernelSource> out = {{kFwdFile, "gdpa::baseline_fwd" + args, {}}};
  if (backward) {
    out.push_back({kBwdFile, "gdpa::baseline_bwd_dkdv" + args, {}});
    out.push_back({kBwdFile, "gdpa::baseline_bwd_dq" + args, {}});
  }
  return out;
}

int baseline_max_smem_optin(int arch) {
  switch (arch) {
    case 80:
    case 87:
      return 163 * 1024;
    case 90:
    case 100:
    case 101:
    case 103:
    case 110:
      return 227 * 1024;
    default:
      return 99 * 1024;  // sm_86, sm_89, sm_120, sm_121, and anything not known here
  }
}

std::unique_ptr<AttentionKernel> make_baseline_kernel() { return std::make_unique<BaselineKernel>(); }

}  // namespace gdpa
