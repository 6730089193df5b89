// tma.cuh — the tensor memory accelerator: bulk tensor copies between global and shared memory.
//
// One elected thread issues each copy; completion is signalled on an mbarrier (loads) or through
// bulk groups (stores and reduces). The tensor map (CUtensorMap on the host, 128 bytes) is passed
// as a __grid_constant__ kernel parameter so its address is a valid generic address for TMA.
#pragma once
#include "common.cuh"

namespace gdpa::ptx {

// Opaque 128-byte descriptor, bit-identical to the Driver API's CUtensorMap (NVRTC has no cuda.h).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// L2 eviction policies for the .L2::cache_hint operand: Q is read once per tile (evict first),
// K and V are re-read by every query tile of the sequence (evict last).
constexpr unsigned long long kEvictFirst = 0x12F0000000000000ull;
constexpr unsigned long long kEvictLast = 0x14F0000000000000ull;
constexpr unsigned long long kEvictNormal = 0x1000000000000000ull;

__device__ __forceinline__ void prefetch_tensormap(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// 3-D tile load: coordinates are element indices, innermost first ({column, head, row} for the
// packed [rows, heads, dim] tensors). Out-of-bounds elements are zero-filled and still counted in
// the transaction bytes.
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const TensorMap* map, unsigned long long* bar,
                                            int c0, int c1, int c2, unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar)),
      "l"(policy)
      : "memory");
}

// 4-D tile load, coordinates innermost first. The kernels use it with the jagged maps
// (host/tensor_map.h make_tensor_map_jagged): {column, head, row - end + window, end}, so that
// rows at or past a sequence's end fall outside the map and arrive as zeros.
__device__ __forceinline__ void tma_load_4d(void* smem_dst, const TensorMap* map, unsigned long long* bar,
                                            int c0, int c1, int c2, int c3, unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar)),
      "l"(policy)
      : "memory");
}

// 3-D tile store from shared memory (rows past the tensor's extent are clipped by the hardware).
// `smem_src` is a shared-window address (smem_addr). The issuing thread commits it to a bulk group
// and must wait for that group (bulk_wait_group_read) before the buffer is written again.
__device__ __forceinline__ void tma_store_3d(const TensorMap* map, unsigned smem_src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(smem_src)
               : "memory");
}

// Element-wise fp32 add of `bytes` bytes from shared memory into global memory, done by the TMA
// unit without atomics in the issuing threads (16-byte aligned, size a multiple of 16).
__device__ __forceinline__ void bulk_reduce_add_f32(float* gmem_dst, const float* smem_src, unsigned bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(smem_addr(smem_src)), "r"(bytes)
               : "memory");
}

// Plain copy of `bytes` bytes from shared to global memory by the TMA unit (same alignment rules):
// the first writer of a block stores where later ones add, so nothing has to be zeroed first.
__device__ __forceinline__ void bulk_copy_s2g(void* gmem_dst, const void* smem_src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst), "r"(smem_addr(smem_src)),
               "r"(bytes)
               : "memory");
}

// Plain copy of `bytes` bytes from global to shared memory by the TMA unit (16-byte aligned, size a
// multiple of 16); completion is counted on `bar` as transaction bytes, like a tensor load.
__device__ __forceinline__ void bulk_copy_g2s(void* smem_dst, const void* gmem_src, unsigned bytes,
                                              unsigned long long* bar, unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_addr(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Waits until at most N bulk groups are pending; the .read form only until their shared-memory
// sources may be overwritten.
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace gdpa::ptx
