// unfused.cu — the device kernels of the unfused path (host/unfused_cublas.cpp): what a user
// without a fused GDPA kernel writes around cuBLAS, one memory-bound pass per step:
//   gather   packed jagged [total, heads, D] -> padded [nb, heads, len_pad, D], zero padding
//   act      S -> P on the padded score matrix: mask, length bounds, activation, out_scale
//   act_bwd  (S, dP) -> (P, dS) for the backward
//   scatter  padded [nb, heads, len_pad, D] -> packed rows of the real lengths
// A chunk covers sequences b0 .. b0 + nb - 1; padded sequence bl is sequence b0 + bl.
// Every kernel is a grid-stride loop over 16-byte groups of 8 elements (block = 256 threads, any
// grid); indices are 64-bit because a padded chunk can hold more than 2^31 elements.
#include "../common/activations.cuh"
#include "../common/dtype.cuh"
#include "../common/masks.cuh"

namespace gdpa {
namespace unfused {

struct alignas(16) Bits128 {  // eight 16-bit io elements, element 2w in the low half of word w
  unsigned w[4];
};

GDPA_DEVICE unsigned short lane16(const Bits128& v, int e) {
  return (unsigned short)(e % 2 == 0 ? (v.w[e / 2] & 0xffffu) : (v.w[e / 2] >> 16));
}
GDPA_DEVICE void set_lane16(Bits128& v, int e, unsigned short h) {
  if (e % 2 == 0)
    v.w[e / 2] = (v.w[e / 2] & 0xffff0000u) | h;
  else
    v.w[e / 2] = (v.w[e / 2] & 0x0000ffffu) | (unsigned(h) << 16);
}

GDPA_DEVICE long long grid_start() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }
GDPA_DEVICE long long grid_step() { return (long long)gridDim.x * blockDim.x; }

}  // namespace unfused

// dst[bl][h][i][:] = src[cu[s] + i][h][:] for i < len(s), zeros for len(s) <= i < len_pad, where
// s = seq_map ? seq_map[b0 + bl] : b0 + bl (seq_map is kv_index when K/V are gathered per query
// sequence). heads is the tensor's own head count (heads_q for Q/dO, heads_kv for K/V).
template <int HEAD_DIM>
__global__ void __launch_bounds__(256) unfused_gather(const unsigned short* src,
                                                      unsigned short* dst, const int* cu_seqlens,
                                                      const int* seq_map, int b0, int nb,
                                                      int heads, int len_pad) {
  using namespace unfused;
  constexpr int kChunks = HEAD_DIM / 8;
  const long long total = (long long)nb * heads * len_pad * kChunks;
  for (long long idx = grid_start(); idx < total; idx += grid_step()) {
    // idx = ((bl * heads + h) * len_pad + i) * kChunks + c, the padded layout in order.
    const int c = int(idx % kChunks);
    long long t = idx / kChunks;
    const int i = int(t % len_pad);
    t /= len_pad;
    const int h = int(t % heads);
    const int bl = int(t / heads);
    const int s = seq_map ? seq_map[b0 + bl] : b0 + bl;
    const int begin = cu_seqlens[s];
    const int len = cu_seqlens[s + 1] - begin;
    Bits128 v = {{0u, 0u, 0u, 0u}};
    if (i < len)
      v = *reinterpret_cast<const Bits128*>(src + ((long long)(begin + i) * heads + h) * HEAD_DIM +
                                            c * 8);
    *reinterpret_cast<Bits128*>(dst + idx * 8) = v;
  }
}

// The inverse of unfused_gather without a seq_map: packed rows of the real lengths only.
template <int HEAD_DIM>
__global__ void __launch_bounds__(256) unfused_scatter(const unsigned short* src,
                                                       unsigned short* dst, const int* cu_seqlens,
                                                       int b0, int nb, int heads, int len_pad) {
  using namespace unfused;
  constexpr int kChunks = HEAD_DIM / 8;
  const long long total = (long long)nb * heads * len_pad * kChunks;
  for (long long idx = grid_start(); idx < total; idx += grid_step()) {
    const int c = int(idx % kChunks);
    long long t = idx / kChunks;
    const int i = int(t % len_pad);
    t /= len_pad;
    const int h = int(t % heads);
    const int bl = int(t / heads);
    const int begin = cu_seqlens[b0 + bl];
    const int len = cu_seqlens[b0 + bl + 1] - begin;
    if (i >= len) continue;  // padding rows have no packed home
    *reinterpret_cast<Bits128*>(dst + ((long long)(begin + i) * heads + h) * HEAD_DIM + c * 8) =
        *reinterpret_cast<const Bits128*>(src + idx * 8);
  }
}

// Where the score element (bl, h, i, j) of a padded [nb, heads_q, lq_pad, lk_pad] matrix belongs.
struct ScoreCoord {
  int i, j, len_q, len_k;
};

GDPA_DEVICE ScoreCoord score_coord(long long vec, int lq_pad, int lk_pad, int heads_q, int b0,
                                   const int* cu_q, const int* cu_k, const int* kv_index) {
  // vec = ((bl * heads_q + h) * lq_pad + i) * (lk_pad / 8) + j / 8
  const int vecs_per_row = lk_pad / 8;
  ScoreCoord sc;
  sc.j = int(vec % vecs_per_row) * 8;
  const long long row = vec / vecs_per_row;
  sc.i = int(row % lq_pad);
  const int bl = int(row / lq_pad / heads_q);
  const int b = b0 + bl;
  const int kv = kv_index ? kv_index[b] : b;
  sc.len_q = cu_q[b + 1] - cu_q[b];
  sc.len_k = cu_k[kv + 1] - cu_k[kv];
  return sc;
}

// In place on the padded scores of one chunk: S (already logit_scale * Q K^T, as cuBLAS stored it
// in the io dtype) becomes P = allowed ? out_scale * act(S) : 0 in the io dtype. Padding rows and
// columns (i >= Lq, j >= Lk, and the columns up to lk_pad that no GEMM writes) become 0, so they
// contribute nothing to P V. lk_pad must be a multiple of 8.
template <int DTYPE, int ACT, int MASK>
__global__ void __launch_bounds__(256) unfused_act(unsigned short* s, const int* cu_q,
                                                   const int* cu_k, const int* kv_index, int b0,
                                                   int nb, int heads_q, int lq_pad, int lk_pad,
                                                   float out_scale, int window_left,
                                                   int window_right) {
  using namespace unfused;
  const long long total = (long long)nb * heads_q * lq_pad * (lk_pad / 8);
  for (long long vec = grid_start(); vec < total; vec += grid_step()) {
    const ScoreCoord sc = score_coord(vec, lq_pad, lk_pad, heads_q, b0, cu_q, cu_k, kv_index);
    Bits128* ptr = reinterpret_cast<Bits128*>(s + vec * 8);
    const Bits128 in = *ptr;
    Bits128 out = {{0u, 0u, 0u, 0u}};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (!mask_allowed(MASK, sc.i, sc.j + e, sc.len_q, sc.len_k, window_left, window_right))
        continue;  // zero, and the (possibly unwritten) input is never looked at
      const float x = io_to_float(DTYPE, lane16(in, e));
      set_lane16(out, e, float_to_io(DTYPE, out_scale * act_f<ACT>(x)));
    }
    *ptr = out;
  }
}

// Backward, in place: S -> P = allowed ? out_scale * act(S) : 0 (for dV = P^T dO) and
// dP -> dS = allowed ? (logit_scale * out_scale) * act'(S) * dP : 0 (for dQ and dK), io dtype.
template <int DTYPE, int ACT, int MASK>
__global__ void __launch_bounds__(256) unfused_act_bwd(unsigned short* s, unsigned short* dp,
                                                       const int* cu_q, const int* cu_k, int b0,
                                                       int nb, int heads_q, int lq_pad, int lk_pad,
                                                       float logit_scale, float out_scale,
                                                       int window_left, int window_right) {
  using namespace unfused;
  const long long total = (long long)nb * heads_q * lq_pad * (lk_pad / 8);
  const float scale = logit_scale * out_scale;
  for (long long vec = grid_start(); vec < total; vec += grid_step()) {
    const ScoreCoord sc = score_coord(vec, lq_pad, lk_pad, heads_q, b0, cu_q, cu_k, nullptr);
    Bits128* s_ptr = reinterpret_cast<Bits128*>(s + vec * 8);
    Bits128* dp_ptr = reinterpret_cast<Bits128*>(dp + vec * 8);
    const Bits128 s_in = *s_ptr, dp_in = *dp_ptr;
    Bits128 p_out = {{0u, 0u, 0u, 0u}}, ds_out = {{0u, 0u, 0u, 0u}};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (!mask_allowed(MASK, sc.i, sc.j + e, sc.len_q, sc.len_k, window_left, window_right))
        continue;
      float f, df;
      act_f_df<ACT>(io_to_float(DTYPE, lane16(s_in, e)), &f, &df);
      set_lane16(p_out, e, float_to_io(DTYPE, out_scale * f));
      set_lane16(ds_out, e, float_to_io(DTYPE, scale * df * io_to_float(DTYPE, lane16(dp_in, e))));
    }
    *s_ptr = p_out;
    *dp_ptr = ds_out;
  }
}

}  // namespace gdpa
