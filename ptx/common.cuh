// common.cuh — addresses and lane helpers every PTX wrapper needs.
#pragma once

namespace gdpa::ptx {

// 32-bit shared-window address of a generic pointer into shared memory: the form every
// shared::cta operand of mbarrier, TMA, wgmma descriptors and ldmatrix/stmatrix takes.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ int lane_id() { return threadIdx.x & 31; }
__device__ __forceinline__ int warp_id() { return threadIdx.x >> 5; }

// threadIdx.x read afresh (a volatile read the compiler cannot merge with earlier ones): for code
// that runs once per work tile, so that a value derived from the thread index is not kept live, or
// spilled, across the whole main loop of a kernel that needs every register.
__device__ __forceinline__ int thread_x_fresh() {
  int v;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v));
  return v;
}

// Programmatic dependent launch (sm_90): once every CTA of this grid has issued it (or exited),
// a kernel launched behind it with programmatic stream serialization may start.
__device__ __forceinline__ void griddepcontrol_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// The device-wide nanosecond timer (the same clock on every SM, unlike clock64's cycle counter), for
// event traces that compare CTAs on different SMs.
__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Index of this thread's warpgroup (4 consecutive warps, the unit wgmma and setmaxnreg act on).
// Read through a shuffle so the compiler knows it is warp-uniform and keeps role branches uniform.
__device__ __forceinline__ int warpgroup_id() { return __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0); }

// Starts moving the 128-byte line holding `p` into L1 without waiting for it or holding a register:
// a later ordinary load of it then hits L1 instead of paying the L2 latency on the critical path.
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(reinterpret_cast<unsigned long long>(p)));
}

// Shared-memory stores and loads through 32-bit shared-window addresses: a generic pointer costs
// two registers and a 64-bit add per access, which matters in epilogues that run with every
// register of a consumer thread taken by accumulators.
__device__ __forceinline__ void st_shared_u32(unsigned addr, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
// Four 8 x 8 matrices of 16-bit values to shared memory in one warp instruction (sm_90): lane l
// gives the address of row l % 8 of matrix l / 8 (16 contiguous bytes, 16-byte aligned; rows may
// lie anywhere, so a swizzled layout costs nothing), and register j of lane l holds columns
// 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix j: the layout of a wgmma accumulator's
// packed pairs, so an 8-column block of a fragment is stored without a shuffle.
__device__ __forceinline__ void stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
// The same four matrices stored transposed: element (row, col) of matrix j goes to row col of
// that matrix in memory, so lane l now gives the address of the memory row that takes column
// l % 8 of matrix l / 8. A fragment whose rows are keys (or the head dim) and whose columns are
// queries lands as [query][key] rows: the forward's query-column tiles (fwd_tail.cu) store P and
// O that way.
__device__ __forceinline__ void stmatrix_x4_trans(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ uint4 ld_shared_u128(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

}  // namespace gdpa::ptx
