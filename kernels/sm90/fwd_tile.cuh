// fwd_tile.cuh — a forward work tile as the kernels read it: the host's 32-byte FwdTileRecord
// (fwd_config.h) with its packed fields decoded on use, and the tiles each CTA runs. Shared by the
// main forward (gdpa_fwd.cu), its sibling tails' warpgroup (fwd_sibling_tail.cuh) and the
// query-column tiles (fwd_tail.cu).
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

// The tiles CTA blockIdx.x runs: its own range of a per-CTA schedule, or every gridDim-th tile.
__device__ __forceinline__ void cta_tiles(const GdpaParams& p, int* begin, int* end, int* stride) {
  if (p.cta_tile_begin) {
    *begin = p.cta_tile_begin[blockIdx.x];
    *end = p.cta_tile_begin[blockIdx.x + 1];
    *stride = 1;
  } else {
    *begin = blockIdx.x;
    *end = p.num_tiles;
    *stride = gridDim.x;
  }
}

// kFwdSiblingTails: the piece a host tile carries (fwd_config.h), 0 rows where it carries none.
struct FwdPiece {
  int rows, first;  // query rows, and the first of them (sequence-local)
};
__device__ __forceinline__ FwdPiece fwd_piece(const FwdTile& t) {
  return FwdPiece{fwd_piece_rows(t.flags), fwd_piece_first(t.flags)};
}

}  // namespace gdpa::sm90
