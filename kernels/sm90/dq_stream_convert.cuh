// dq_stream_convert.cuh — kBwdDqStreamConvert: dQ blocks converted inside the backward's grid.
//
// On the deterministic accumulator path the fp32 dQ accumulator is written back to DRAM by L2 and
// read back by the separate dq_convert pass: at self s = 1 L = 512 that pass is 13 % of the
// backward (ncu: 0.45 ms of 3.5 ms, 1.2 GB read, at the copy bandwidth), while the main kernel
// moves 1.6 TB/s. Here the last CTAs of the grid take no tiles: each of their warps converts
// blocks of the host's list (in estimated order of completion) as soon as a block's semaphore
// reaches its number of contributors, the accumulator's lines often still in L2, and the DRAM
// traffic overlaps the other CTAs' GEMMs. A whole SM per converting CTA is the price: the grid
// holds one CTA per SM, and the backward's CTAs leave no registers for a second kernel to run
// next to them.
//
// The arithmetic is dq_convert.cu's (accumulator * logit_scale * out_scale, rounded once to the
// io dtype), so dQ has the same bits. A warp converts one 64 x 64 chunk at a time through its own
// staging rows in shared memory: fragment-order float4 reads (the accumulator layout of
// bwd_config.h), row-order 16-byte stores of the rows inside the sequence.
#pragma once
#include "../../ptx/fence.cuh"
#include "../common/params.h"
#include "bwd_config.h"
#include "fragments.cuh"

namespace gdpa::sm90 {

// A staged row: 64 io values (128 bytes) plus 16, so the fragment-order 4-byte stores of a warp
// hit 32 different banks and rows stay 16-byte aligned for the row-order reads.
constexpr int kStreamRowBytes = 144;
constexpr int kStreamWarpBytes = kBwdBlockM * kStreamRowBytes;

// Waits until the block's semaphore counts `expected` adds. One lane spins (with a trap after
// ~2^35 cycles: a bug, not a hang); then every lane acquires the final count itself, so each
// lane's reads of the accumulator are ordered after the contributors' releases.
__device__ __forceinline__ void dq_stream_wait(const int* sem, int expected, int lane) {
  if (lane == 0) {
    const long long start = clock64();
    while (ptx::ld_acquire_gpu(sem) != expected) {
      __nanosleep(64);
      if (clock64() - start > (1ll << 35)) __trap();
    }
  }
  __syncwarp();
  (void)ptx::ld_acquire_gpu(sem);
}

template <int DTYPE, int D>
__device__ __forceinline__ void bwd_dq_stream_convert(const GdpaParams& p, unsigned char* smem) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5, warps = int(blockDim.x) >> 5;
  const int agent = (int(blockIdx.x) - p.num_work_ctas) * warps + warp;
  const int agents = (int(gridDim.x) - p.num_work_ctas) * warps;
  unsigned char* const tile = smem + warp * kStreamWarpBytes;
  const float scale = p.logit_scale * p.out_scale;
  const long long row_stride = (long long)p.heads_q * D;  // elements
  const auto* list = static_cast<const DqConvertEntry*>(p.dq_conv_list);
#pragma unroll 1
  for (int i = agent; i < p.dq_conv_count; i += agents) {
    const DqConvertEntry e = list[i];
    if (e.expected > 0) dq_stream_wait(p.semaphores + e.block, e.expected, lane);
    const int head = e.block % p.heads_q;
    unsigned short* const out = static_cast<unsigned short*>(p.dq) + (long long)e.first_row * row_stride + head * D;
#pragma unroll 1
    for (int c = 0; c < D / kBwdDqCols; ++c) {
      const float4* src =
          reinterpret_cast<const float4*>(p.dq_accum + ((long long)e.block * (D / kBwdDqCols) + c) * kBwdDqJobFloats);
      // 1024 float4 per chunk, 32 per lane, in two batches of 16 loads in flight. float4 [k][tid]
      // holds registers 4k..4k+3 of consumer thread tid (bwd_config.h dq_frag_index).
#pragma unroll 1
      for (int half = 0; half < 2; ++half) {
        float4 v[16];
#pragma unroll
        for (int j = 0; j < 16; ++j)
          v[j] = e.expected > 0 ? __ldcg(src + (half * 16 + j) * 32 + lane) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const int idx = (half * 16 + j) * 32 + lane, k = idx >> 7, tid = idx & 127;
          const int row = dq_frag_row(tid, 4 * k), col = dq_frag_col(tid, 4 * k);
          *reinterpret_cast<unsigned*>(tile + row * kStreamRowBytes + col * 2) =
              pack2<DTYPE>(v[j].x * scale, v[j].y * scale);
          *reinterpret_cast<unsigned*>(tile + (row + 8) * kStreamRowBytes + col * 2) =
              pack2<DTYPE>(v[j].z * scale, v[j].w * scale);
        }
      }
      __syncwarp();
      // Rows past the sequence's end belong to the next sequence: never written.
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int q = j * 32 + lane, row = q >> 3, part = q & 7;
        if (row < e.rows)
          *reinterpret_cast<uint4*>(out + row * row_stride + c * kBwdDqCols + part * 8) =
              *reinterpret_cast<const uint4*>(tile + row * kStreamRowBytes + part * 16);
      }
      __syncwarp();  // the staging rows are rewritten by the next chunk
    }
  }
}

}  // namespace gdpa::sm90
