// fwd_tile.cuh — a forward work tile as the kernels read it: the host's 32-byte FwdTileRecord
// (fwd_config.h) with its packed fields decoded on use. Shared by the main forward (gdpa_fwd.cu)
// and its query-column tiles (fwd_tail.cu).
#pragma once
#include "../common/params.h"
#include "fwd_config.h"

namespace gdpa::sm90 {

// One work tile as the host described it (FwdTileRecord), kept packed in registers: consumers
// hold two of these (this tile and the next) next to ~190 registers of fragments, so every field
// that can be decoded on use is.
struct FwdTile : FwdTileRecord {
  __device__ int head() const { return heads & 0xFFFF; }
  __device__ int kv_head() const { return heads >> 16; }
  __device__ int n_begin() const { return n_range & 0xFFFF; }
  __device__ int n_end() const { return n_range >> 16; }
  __device__ bool empty() const { return n_end() <= n_begin(); }
  __device__ bool reuses_kv() const { return (flags & kFwdTileReusesKv) != 0; }
};

__device__ __forceinline__ FwdTile fwd_tile(const GdpaParams& p, int index) {
  const int4* r = reinterpret_cast<const int4*>(p.tile_records) + 2 * index;  // FwdTileRecord
  const int4 a = r[0], b = r[1];
  return FwdTile{{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
}

}  // namespace gdpa::sm90
