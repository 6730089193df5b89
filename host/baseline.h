// baseline.h — the simple, obviously-correct GPU implementation (kernels/baseline/): the GPU
// oracle for problems too big for the CPU reference, and the "simple kernel" row of every
// benchmark. Plain-FMA kernels on fp32 shared-memory tiles, any sm_80+ GPU with enough shared
// memory (forward 85 KB, backward 149 KB at D = 128).
#pragma once
#include <memory>
#include <vector>

#include "compile.h"
#include "kernel_api.h"

namespace gdpa {

// The variants `p` needs, as NVRTC name expressions (template arguments <dtype, head_dim,
// activation, mask>, the numbering of enums.h):
//   "gdpa::baseline_fwd<0,128,3,0>"        kernels/baseline/gdpa_fwd.cu (always)
//   "gdpa::baseline_bwd_dkdv<0,128,3,0>"   kernels/baseline/gdpa_bwd.cu (backward only)
//   "gdpa::baseline_bwd_dq<0,128,3,0>"     kernels/baseline/gdpa_bwd.cu (backward only)
// The forward is listed for a backward too: prepare(backward = true) readies both directions.
std::vector<KernelSource> baseline_kernel_sources(const ProblemDesc& p, bool backward);

// Largest dynamic shared memory one block may opt in to on `arch` (bytes), from the CUDA
// programming guide's per-architecture table; a conservative 99 KB for unknown archs.
int baseline_max_smem_optin(int arch);

// Implements kernel_api.h under the name "baseline". The backward is deterministic (no atomics).
std::unique_ptr<AttentionKernel> make_baseline_kernel();

}  // namespace gdpa
