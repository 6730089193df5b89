// act_eval.cu — each activation's f and f' evaluated on the GPU exactly as the kernels evaluate
// them (the MUFU instructions included), for `gdpa accuracy`: the host compares the results with
// the fp64 definitions. The host's own act_f cannot stand in for this: it has no tanh.approx.
#include "activations.cuh"

namespace gdpa {

// f[i] = act(x[i]), df[i] = act'(x[i]) in fp32, for i < n.
template <int ACT>
__global__ void act_eval(const float* x, float* f, float* df, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  float fv, dv;
  act_f_df<ACT>(x[i], &fv, &dv);
  f[i] = fv;
  df[i] = dv;
}

}  // namespace gdpa
