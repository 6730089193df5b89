// The Hopper forward kernel without a GPU: its shared-memory plan, NVRTC compilation of its
// variants for sm_90a, and the SASS the design promises (HGMMA, UTMALDG, SYNCS, USETMAXREG, no
// local-memory spills).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include "../../host/compile.h"
#include "../../host/problem.h"
#include "../../host/sm90.h"
#include "../../kernels/sm90/fwd_config.h"
#include "sass_tools.h"

using namespace gdpa;

TEST_CASE("sm90 forward shared-memory plan: 1024-aligned tiles, fits the 227 KB a CTA may use") {
  for (int d : {64, 128})
    for (int flags : {0, int(sm90::kFwdDefaultFlags)}) {
      const sm90::FwdSmemPlan s = sm90::fwd_smem_plan(d, sm90::fwd_block_n(d), sm90::fwd_q_stages(flags));
      CHECK(s.q_off % 1024 == 0);
      CHECK(s.k_off % 1024 == 0);
      CHECK(s.v_off % 1024 == 0);
      CHECK(s.k_off - s.q_off == sm90::fwd_q_stages(flags) * sm90::kFwdBlockM * d * 2);
      CHECK(s.bar_off % 8 == 0);
      CHECK(sm90::fwd_smem_request(d, sm90::fwd_block_n(d), flags) <= 227 * 1024);
    }
  // 3 warpgroups: 1 producer + 2 consumers of 64 rows.
  CHECK(sm90::kFwdThreads == 384);
  CHECK(sm90::kFwdBlockM == 128);
}

TEST_CASE("sm90 forward compiles for sm_90a with the instructions the design needs") {
  ProblemDesc p;
  p.cu_seqlens_q = p.cu_seqlens_k = {0, 1};
  struct V {
    DType dt;
    int d;
    Activation a;
    MaskKind m;
    int max_local;  // LDL + STL instructions allowed
  };
  // The benchmark variant and a D = 64 one keep every register; the heaviest combination (the
  // 10-FMA gelu_poly with a two-sided window mask) spills a few loop-carried scalars, a handful of
  // local accesses per tile against ~16k instructions per tile, never a fragment register.
  const V variants[] = {{kBF16, 128, kFastGelu, kMaskNone, 0},
                        {kFP16, 64, kSilu, kMaskCausal, 0},
                        {kBF16, 128, kGeluPoly, kMaskWindow, 8}};
  for (const V& v : variants) {
    p.dtype = v.dt;
    p.head_dim = v.d;
    p.activation = v.a;
    p.mask = v.m;
    if (v.m == kMaskWindow) p.window_left = p.window_right = 16;
    const std::vector<KernelSource> srcs = sm90_kernel_sources(p, Sm90Options{}, false);
    REQUIRE(srcs.size() == 1);
    const CompiledKernel k = compile_kernel(srcs[0], 90);
    CAPTURE(srcs[0].name_expression);
    REQUIRE(k.cubin.size() > 1000);
    const std::string sass = disassemble(k.cubin);
    REQUIRE_MESSAGE(!sass.empty(), "cuobjdump is needed for this test (make test installs it)");
    CHECK(count_of(sass, "HGMMA.64x") >= 16);
    CHECK(count_of(sass, "UTMALDG.3D") >= 3);
    CHECK(count_of(sass, "SYNCS.PHASECHK") >= 4);
    CHECK(count_of(sass, "SYNCS.ARRIVE") >= 2);
    CHECK(count_of(sass, "USETMAXREG") >= 2);
    CHECK(count_of(sass, "LDL") + count_of(sass, "STL") <= v.max_local);
  }
}
