#include "accuracy.h"

#include <cmath>

#include "../kernels/common/activations.cuh"
#include "compile.h"

namespace gdpa {

std::vector<double> accuracy_bounds() { return {1.0, 4.0, 8.0}; }

namespace {

bool is_gelu_family(int act) {
  return act == kGelu || act == kGeluTanh || act == kFastGelu || act == kFastGeluBf16 || act == kGeluTaylor6 ||
         act == kGeluPoly;
}

std::vector<ErrorBand> compare(const std::vector<float>& x, const std::vector<float>& f, const std::vector<float>& df,
                               int reference) {
  std::vector<ErrorBand> bands;
  for (double bound : accuracy_bounds()) {
    ErrorBand b;
    b.bound = bound;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::fabs(double(x[i])) > bound) continue;
      const double ef = std::fabs(double(f[i]) - act_f_exact(reference, double(x[i])));
      const double ed = std::fabs(double(df[i]) - act_df_exact(reference, double(x[i])));
      if (!(ef <= b.max_abs_f)) b.max_abs_f = ef, b.worst_x_f = x[i];  // a NaN error is the worst
      if (!(ed <= b.max_abs_df)) b.max_abs_df = ed, b.worst_x_df = x[i];
    }
    bands.push_back(b);
  }
  return bands;
}

}  // namespace

ActivationAccuracy measure_activation_accuracy(int activation, int arch, CUstream stream) {
  const int steps_per_unit = 1024;
  const int n = 16 * steps_per_unit + 1;
  const size_t count_n = static_cast<size_t>(n);
  std::vector<float> x(count_n), f(count_n), df(count_n);
  for (int i = 0; i < n; ++i) x[size_t(i)] = float(-8.0 + double(i) / steps_per_unit);  // exact in fp32

  const KernelSource src{"kernels/common/act_eval.cu", "gdpa::act_eval<" + std::to_string(activation) + ">", {}};
  const CompiledKernel ck = compile_kernel(src, arch);
  Module module(ck.cubin.data(), ck.lowered_name);
  DeviceBuffer dx(x.size() * sizeof(float)), dfv(f.size() * sizeof(float)), ddf(df.size() * sizeof(float));
  dx.upload(x);
  dfv.fill_u32(0x7FC00000u, stream);  // NaN: an element the kernel did not write fails the comparison
  ddf.fill_u32(0x7FC00000u, stream);
  const float* px = reinterpret_cast<const float*>(dx.ptr());
  float* pf = reinterpret_cast<float*>(dfv.ptr());
  float* pd = reinterpret_cast<float*>(ddf.ptr());
  int count = n;
  void* args[] = {&px, &pf, &pd, &count};
  LaunchShape shape;
  shape.block[0] = 256;
  shape.grid[0] = unsigned((n + 255) / 256);
  launch(module.function(), shape, stream, args);
  GDPA_CU(cu().cuStreamSynchronize(stream));
  dfv.download(f);
  ddf.download(df);

  ActivationAccuracy a;
  a.activation = activation;
  a.name = activation_name(activation);
  a.own = compare(x, f, df, activation);
  if (is_gelu_family(activation)) {
    a.vs_gelu = compare(x, f, df, kGelu);
    a.vs_gelu_tanh = compare(x, f, df, kGeluTanh);
  }
  return a;
}

}  // namespace gdpa
