// gdpa_bwd.cu — the baseline GDPA backward (spec section 4): two simple, deterministic kernels.
//
//   baseline_bwd_dkdv: one CTA per (64-key tile, KV head, sequence). It loops over the G query
//     heads of its group and over the query tiles the mask lets its keys see, recomputing
//       S^T = K Q^T, dP^T = V dO^T                               (fp32, tile_abt)
//       P^T  = allowed ? round_io(out_scale * act(S)) : 0
//       dS^T = allowed ? round_io(logit_scale * out_scale * act'(S) * dP) : 0
//       dV += P^T dO,  dK += dS^T Q                               (fp32, tile_ab)
//     and writes dK and dV once. The GQA sum over the group happens in registers, in a fixed
//     order (heads ascending, then query tiles ascending): no atomics, bit-identical run to run.
//   baseline_bwd_dq: one CTA per (64-row query tile, query head, sequence), looping over the key
//     tiles: recompute S, dP and dS the same way, dQ += dS K in fp32, write dQ once.
// S here already includes logit_scale (S = logit_scale * Q.K); dS is formed as
// (logit_scale * out_scale) * act'(S) * dP, the order the fast kernels use. Rows past a sequence
// end are zero in shared memory and never written. kv_index is forward-only: the host rejects it.
//
// Launch (host/baseline.cpp): block = 256 threads, dynamic shared memory =
// baseline::bwd_smem_bytes(D) (layout.h) for both;
//   dkdv: grid.x = tiles_for(max_seqlen_k) * heads_kv * batch,
//   dq:   grid.x = tiles_for(max_seqlen_q) * heads_q * batch.
#include "../common/activations.cuh"
#include "../common/dtype.cuh"
#include "../common/masks.cuh"
#include "../common/params.h"
#include "fma_tiles.cuh"

namespace gdpa {
namespace baseline {

// The two rounded operands of one allowed (i, j) pair; both zero for a disallowed pair (the
// activation is not even evaluated there, so a masked -inf or NaN logit never matters).
template <int DTYPE, int ACT>
GDPA_DEVICE void pair_grads(float s_raw, float dp, const GdpaParams& p, float* p_io, float* ds_io) {
  const float s = s_raw * p.logit_scale;
  float f, df;
  act_f_df<ACT>(s, &f, &df);
  *p_io = round_io(DTYPE, p.out_scale * f);
  *ds_io = round_io(DTYPE, (p.logit_scale * p.out_scale) * df * dp);
}

GDPA_DEVICE void zero_acc(float (&acc)[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
}

template <int D>
GDPA_DEVICE void zero_rows(float (&acc)[4][D / 16]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int c = 0; c < D / 16; ++c) acc[i][c] = 0.f;
}

}  // namespace baseline

template <int DTYPE, int HEAD_DIM, int ACT, int MASK>
__global__ void __launch_bounds__(baseline::kThreads, 1) baseline_bwd_dkdv(const GdpaParams p) {
  using namespace baseline;
  constexpr int D = HEAD_DIM;
  static_assert(D == 64 || D == 128, "baseline head dims");
  extern __shared__ Float4 smem_vec[];  // Float4: 16-byte alignment for the vector accesses
  float* smem = reinterpret_cast<float*>(smem_vec);
  float* k_s = smem;                    // [64][D + 4]  K rows n0 .. n0 + 63 of KV head hk
  float* v_s = k_s + tile_floats(D);    // [64][D + 4]  V rows, same keys
  float* q_s = v_s + tile_floats(D);    // [64][D + 4]  Q rows m0 .. m0 + 63 of query head h
  float* do_s = q_s + tile_floats(D);   // [64][D + 4]  dO rows, same queries
  float* t_s = do_s + tile_floats(D);   // [64][64 + 4] P^T[j - n0][i - m0], then dS^T

  // Flat grid, key tile innermost.
  const int tiles_k = tiles_for(p.max_seqlen_k);
  const int k_tile = int(blockIdx.x % unsigned(tiles_k));
  const int bh = int(blockIdx.x / unsigned(tiles_k));
  const int hk = bh % p.heads_kv;
  const int b = bh / p.heads_kv;

  const int k_begin = p.cu_seqlens_k[b];
  const int len_k = p.cu_seqlens_k[b + 1] - k_begin;
  const int n0 = k_tile * kTile;  // first local key row of the tile
  if (n0 >= len_k) return;        // whole CTA leaves together, before any barrier
  const int rows_k = imin(kTile, len_k - n0);
  const int q_begin = p.cu_seqlens_q[b];
  const int len_q = p.cu_seqlens_q[b + 1] - q_begin;

  const long long q_stride = (long long)p.heads_q * D;
  const long long k_stride = (long long)p.heads_kv * D;
  const long long k_off = (k_begin + n0) * k_stride + hk * D;  // (key row n0, head hk, d = 0)

  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  stage_tile<DTYPE, D>(k_s, static_cast<const unsigned short*>(p.k) + k_off, k_stride, rows_k);
  stage_tile<DTYPE, D>(v_s, static_cast<const unsigned short*>(p.v) + k_off, k_stride, rows_k);

  // Query rows that can see keys [n0, n0 + rows_k). With Lq = 0 (or a mask no query passes) the
  // loop is empty and dK = dV = 0 are written: those keys have zero gradient.
  int query_lo, query_hi;
  mask_query_range(MASK, n0, n0 + rows_k, len_q, len_k, p.window_left, p.window_right, &query_lo,
                   &query_hi);

  float dk[4][D / 16], dv[4][D / 16];
  zero_rows<D>(dk);
  zero_rows<D>(dv);

  for (int g = 0; g < p.group; ++g) {
    const int h = hk * p.group + g;  // query heads of this KV head's group
    for (int m0 = (query_lo / kTile) * kTile; m0 < query_hi; m0 += kTile) {
      const int rows_q = imin(kTile, len_q - m0);
      const long long q_off = (q_begin + m0) * q_stride + h * D;
      __syncthreads();  // the previous step's dK product has finished reading q_s and t_s
      stage_tile<DTYPE, D>(q_s, static_cast<const unsigned short*>(p.q) + q_off, q_stride, rows_q);
      stage_tile<DTYPE, D>(do_s, static_cast<const unsigned short*>(p.dout) + q_off, q_stride,
                           rows_q);
      __syncthreads();

      // Transposed products: row index = key (tr + 16a), column index = query (tc + 16c).
      float st[4][4], dpt[4][4], dst[4][4];
      zero_acc(st);
      zero_acc(dpt);
      tile_abt<D>(k_s, q_s, tr, tc, st);
      tile_abt<D>(v_s, do_s, tr, tc, dpt);
#pragma unroll
      for (int a = 0; a < 4; ++a) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int j = n0 + tr + 16 * a;  // local key row
          const int i = m0 + tc + 16 * c;  // local query row
          float pv = 0.f, ds = 0.f;
          if (mask_allowed(MASK, i, j, len_q, len_k, p.window_left, p.window_right))
            pair_grads<DTYPE, ACT>(st[a][c], dpt[a][c], p, &pv, &ds);
          t_s[(tr + 16 * a) * smem_ld(kTile) + tc + 16 * c] = pv;
          dst[a][c] = ds;
        }
      }
      __syncthreads();  // P^T complete
      tile_ab<D>(t_s, do_s, tr, tc, dv);  // dV[j] += sum_i P^T[j][i] dO[i]
      __syncthreads();  // everyone is done reading P^T before dS^T overwrites it
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int c = 0; c < 4; ++c) t_s[(tr + 16 * a) * smem_ld(kTile) + tc + 16 * c] = dst[a][c];
      __syncthreads();  // dS^T complete
      tile_ab<D>(t_s, q_s, tr, tc, dk);   // dK[j] += sum_i dS^T[j][i] Q[i]
    }
  }

  store_rows<DTYPE, D>(static_cast<unsigned short*>(p.dk) + k_off, k_stride, rows_k, tr, tc, dk);
  store_rows<DTYPE, D>(static_cast<unsigned short*>(p.dv) + k_off, k_stride, rows_k, tr, tc, dv);
}

template <int DTYPE, int HEAD_DIM, int ACT, int MASK>
__global__ void __launch_bounds__(baseline::kThreads, 1) baseline_bwd_dq(const GdpaParams p) {
  using namespace baseline;
  constexpr int D = HEAD_DIM;
  static_assert(D == 64 || D == 128, "baseline head dims");
  extern __shared__ Float4 smem_vec[];  // Float4: 16-byte alignment for the vector accesses
  float* smem = reinterpret_cast<float*>(smem_vec);
  float* q_s = smem;                    // [64][D + 4]  Q rows m0 .. m0 + 63 of query head h
  float* do_s = q_s + tile_floats(D);   // [64][D + 4]  dO rows, same queries
  float* k_s = do_s + tile_floats(D);   // [64][D + 4]  K rows n0 .. n0 + 63 of KV head hk
  float* v_s = k_s + tile_floats(D);    // [64][D + 4]  V rows, same keys
  float* ds_s = v_s + tile_floats(D);   // [64][64 + 4] dS[i - m0][j - n0]

  // Flat grid, query tile innermost (the forward's order).
  const int tiles_q = tiles_for(p.max_seqlen_q);
  const int q_tile = int(blockIdx.x % unsigned(tiles_q));
  const int bh = int(blockIdx.x / unsigned(tiles_q));
  const int h = bh % p.heads_q;
  const int b = bh / p.heads_q;

  const int q_begin = p.cu_seqlens_q[b];
  const int len_q = p.cu_seqlens_q[b + 1] - q_begin;
  const int m0 = q_tile * kTile;
  if (m0 >= len_q) return;
  const int rows_q = imin(kTile, len_q - m0);
  const int k_begin = p.cu_seqlens_k[b];
  const int len_k = p.cu_seqlens_k[b + 1] - k_begin;
  const int hk = h / p.group;

  const long long q_stride = (long long)p.heads_q * D;
  const long long k_stride = (long long)p.heads_kv * D;
  const long long q_off = (q_begin + m0) * q_stride + h * D;

  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  stage_tile<DTYPE, D>(q_s, static_cast<const unsigned short*>(p.q) + q_off, q_stride, rows_q);
  stage_tile<DTYPE, D>(do_s, static_cast<const unsigned short*>(p.dout) + q_off, q_stride, rows_q);

  int key_lo, key_hi;
  mask_key_range(MASK, m0, m0 + rows_q, len_q, len_k, p.window_left, p.window_right, &key_lo,
                 &key_hi);

  float dq[4][D / 16];
  zero_rows<D>(dq);

  for (int n0 = (key_lo / kTile) * kTile; n0 < key_hi; n0 += kTile) {
    const int rows_k = imin(kTile, len_k - n0);
    const long long k_off = (k_begin + n0) * k_stride + hk * D;
    __syncthreads();  // the previous step's dQ product has finished reading k_s and ds_s
    stage_tile<DTYPE, D>(k_s, static_cast<const unsigned short*>(p.k) + k_off, k_stride, rows_k);
    stage_tile<DTYPE, D>(v_s, static_cast<const unsigned short*>(p.v) + k_off, k_stride, rows_k);
    __syncthreads();

    // Row index = query (tr + 16a), column index = key (tc + 16c).
    float s[4][4], dp[4][4];
    zero_acc(s);
    zero_acc(dp);
    tile_abt<D>(q_s, k_s, tr, tc, s);
    tile_abt<D>(do_s, v_s, tr, tc, dp);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = m0 + tr + 16 * a;
        const int j = n0 + tc + 16 * c;
        float pv = 0.f, ds = 0.f;
        if (mask_allowed(MASK, i, j, len_q, len_k, p.window_left, p.window_right))
          pair_grads<DTYPE, ACT>(s[a][c], dp[a][c], p, &pv, &ds);
        ds_s[(tr + 16 * a) * smem_ld(kTile) + tc + 16 * c] = ds;
      }
    }
    __syncthreads();  // dS complete
    tile_ab<D>(ds_s, k_s, tr, tc, dq);  // dQ[i] += sum_j dS[i][j] K[j]
  }

  store_rows<DTYPE, D>(static_cast<unsigned short*>(p.dq) + q_off, q_stride, rows_q, tr, tc, dq);
}

}  // namespace gdpa
