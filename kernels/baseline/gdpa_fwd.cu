// gdpa_fwd.cu — the baseline GDPA forward: simple, obviously correct, any sm_80+.
//
// One CTA computes one 64-row query tile of one query head of one sequence (spec section 2):
//   for each 64-key tile the mask lets this query tile see:
//     S = Q K^T                       (fp32, plain FMA, tile_abt)
//     P = allowed ? round_io(out_scale * act(logit_scale * S)) : 0
//     O += P V                        (fp32, tile_ab)
//   O is cast to the io dtype once, at the end.
// P is rounded to the io dtype exactly as the tensor-core kernels round their PV operand, so this
// kernel and those agree up to fp32 summation order. Masked pairs are zeroed after the activation,
// never fed -inf (GELU(-inf) and SiLU(-inf) are NaN).
//
// Launch (host/baseline.cpp): grid.x = tiles_q * heads_q * batch with tiles_q =
// ceil(max_seqlen_q / 64), block = 256 threads, dynamic shared memory = baseline::fwd_smem_bytes(D)
// (layout.h).
#include "../common/activations.cuh"
#include "../common/dtype.cuh"
#include "../common/masks.cuh"
#include "../common/params.h"
#include "fma_tiles.cuh"

namespace gdpa {

template <int DTYPE, int HEAD_DIM, int ACT, int MASK>
__global__ void __launch_bounds__(baseline::kThreads, 2) baseline_fwd(const GdpaParams p) {
  using namespace baseline;
  constexpr int D = HEAD_DIM;
  static_assert(D == 64 || D == 128, "baseline head dims");
  extern __shared__ Float4 smem_vec[];  // Float4: 16-byte alignment for the vector accesses
  float* smem = reinterpret_cast<float*>(smem_vec);
  float* q_s = smem;                      // [64][D + 4]  Q rows m0 .. m0 + 63 of head h
  float* kv_s = q_s + tile_floats(D);     // [64][D + 4]  K rows n0 .. n0 + 63, then V rows
  float* p_s = kv_s + tile_floats(D);     // [64][64 + 4] P[i - m0][j - n0]

  // Flat grid, query tile innermost so the CTAs that read the same K/V run at the same time.
  const int tiles_q = tiles_for(p.max_seqlen_q);
  const int q_tile = int(blockIdx.x % unsigned(tiles_q));
  const int bh = int(blockIdx.x / unsigned(tiles_q));
  const int h = bh % p.heads_q;
  const int b = bh / p.heads_q;

  const int q_begin = p.cu_seqlens_q[b];
  const int len_q = p.cu_seqlens_q[b + 1] - q_begin;
  const int m0 = q_tile * kTile;  // first local query row of the tile
  if (m0 >= len_q) return;        // whole CTA leaves together, before any barrier
  const int rows_q = imin(kTile, len_q - m0);

  const int kv_seq = p.kv_index ? p.kv_index[b] : b;  // shared-KV (forward only)
  const int k_begin = p.cu_seqlens_k[kv_seq];
  const int len_k = p.cu_seqlens_k[kv_seq + 1] - k_begin;
  const int hk = h / p.group;  // GQA/MQA: G consecutive query heads read one KV head

  // Packed rows: element (row, head, d) is at row * heads * D + head * D + d.
  const long long q_stride = (long long)p.heads_q * D;
  const long long k_stride = (long long)p.heads_kv * D;
  const unsigned short* q = static_cast<const unsigned short*>(p.q) + (q_begin + m0) * q_stride + h * D;
  const unsigned short* k = static_cast<const unsigned short*>(p.k) + k_begin * k_stride + hk * D;
  const unsigned short* v = static_cast<const unsigned short*>(p.v) + k_begin * k_stride + hk * D;

  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  stage_tile<DTYPE, D>(q_s, q, q_stride, rows_q);

  // Key tiles that can hold an allowed pair for query rows [m0, m0 + rows_q). Lk = 0 gives none,
  // and O stays zero: the spec's zero rows.
  int key_lo, key_hi;
  mask_key_range(MASK, m0, m0 + rows_q, len_q, len_k, p.window_left, p.window_right, &key_lo,
                 &key_hi);

  float o[4][D / 16];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int c = 0; c < D / 16; ++c) o[i][c] = 0.f;

  for (int n0 = (key_lo / kTile) * kTile; n0 < key_hi; n0 += kTile) {
    const int rows_k = imin(kTile, len_k - n0);
    __syncthreads();  // the previous step's O += P V has finished reading kv_s and p_s
    stage_tile<DTYPE, D>(kv_s, k + n0 * k_stride, k_stride, rows_k);
    __syncthreads();

    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0.f;
    tile_abt<D>(q_s, kv_s, tr, tc, s);

#pragma unroll
    for (int a = 0; a < 4; ++a) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = m0 + tr + 16 * a;  // local query row
        const int j = n0 + tc + 16 * c;  // local key row
        // mask_allowed also rejects i >= len_q and j >= len_k (the zero-padded rows).
        float pv = 0.f;
        if (mask_allowed(MASK, i, j, len_q, len_k, p.window_left, p.window_right))
          pv = round_io(DTYPE, p.out_scale * act_f<ACT>(s[a][c] * p.logit_scale));
        p_s[(tr + 16 * a) * smem_ld(kTile) + tc + 16 * c] = pv;
      }
    }
    __syncthreads();  // P complete, and every thread is done reading K from kv_s
    stage_tile<DTYPE, D>(kv_s, v + n0 * k_stride, k_stride, rows_k);
    __syncthreads();
    tile_ab<D>(p_s, kv_s, tr, tc, o);
  }

  unsigned short* out = static_cast<unsigned short*>(p.out) + (q_begin + m0) * q_stride + h * D;
  store_rows<DTYPE, D>(out, q_stride, rows_q, tr, tc, o);
}

}  // namespace gdpa
