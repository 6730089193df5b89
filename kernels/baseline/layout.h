// layout.h — the baseline kernels' tile shape and shared-memory budget, shared by the kernels and
// the host that launches them (one source of truth for block size, grid and smem bytes).
#pragma once
#include "../common/portability.h"

namespace gdpa {
namespace baseline {

constexpr int kTile = 64;      // rows of every staged tile: query tiles and key tiles alike
constexpr int kThreads = 256;  // 16 x 16 threads, see fma_tiles.cuh
constexpr int kPad = 4;        // floats of padding per smem row: keeps 16-byte alignment, rotates banks

// Row stride, in floats, of a staged fp32 tile with `cols` columns.
GDPA_HD constexpr int smem_ld(int cols) { return cols + kPad; }
// Floats of one staged 64-row tile.
GDPA_HD constexpr int tile_floats(int cols) { return kTile * smem_ld(cols); }

// Forward: Q tile, one buffer holding the K tile and then the V tile of the same keys (S is done
// with K before V is needed; sharing keeps D = 128 at 85 KB, two CTAs per SM), and the P tile.
GDPA_HD constexpr int fwd_smem_bytes(int head_dim) {
  return int(sizeof(float)) * (2 * tile_floats(head_dim) + tile_floats(kTile));
}
// Backward (both kernels): four 64 x D tiles (dK/dV kernel: K, V, Q, dO; dQ kernel: Q, dO, K, V)
// and one 64 x 64 tile (P^T then dS^T, or dS). 149 KB at D = 128: fits the 163 KB opt-in of
// sm_80/87 and the 227 KB of sm_90/100, not the 99 KB of sm_86/89/120.
GDPA_HD constexpr int bwd_smem_bytes(int head_dim) {
  return int(sizeof(float)) * (4 * tile_floats(head_dim) + tile_floats(kTile));
}

// Tiles of a sequence of `len` rows.
GDPA_HD constexpr int tiles_for(int len) { return (len + kTile - 1) / kTile; }

}  // namespace baseline
}  // namespace gdpa
