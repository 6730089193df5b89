// smem_desc.h — the 64-bit shared-memory matrix descriptors the tensor cores read operands
// through: Hopper's wgmma descriptor here, Blackwell's tcgen05 (UMMA) descriptor in
// ptx/umma_desc.h. Host and device code share these encoders so the bit layouts are unit-tested on
// the CPU (verify/tests/test_smem_desc.cpp).
//
// Hopper wgmma descriptor (PTX ISA "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4          (shared-window byte address)
//   bits 16-29  leading-dimension byte offset >> 4 (LBO)
//   bits 32-45  stride-dimension byte offset >> 4  (SBO)
//   bits 49-51  base offset (0: every swizzle atom starts 1024-byte aligned, which we guarantee)
//   bits 62-63  swizzle: 0 none, 1 = 128B, 2 = 64B, 3 = 32B
//
// The layout every Hopper kernel here uses is the 128-byte swizzle that TMA writes when its box is
// 64 16-bit elements wide: a tile is a set of "panels", each [rows x 64 elements] with 128-byte
// rows, 8-row groups 1024 bytes apart.
//   K-major operand (the reduction dim is contiguous: Q and K in S = Q K^T): SBO = 1024 (next 8
//     rows); LBO is unused for swizzled K-major layouts (set to 1 by convention). A k16 step
//     advances the start address by 32 bytes inside the 128-byte row; the next 64 elements of K
//     live in the next panel.
//   MN-major operand (N contiguous: V in O = P V): LBO = the byte distance between panels along N
//     (rows * 128), SBO = 1024 (next 8 rows of K); a k16 step advances by 16 rows = 2048 bytes.
#pragma once
#include "../kernels/common/portability.h"

namespace gdpa {

enum WgmmaSwizzle : int { kWgmmaSwizzleNone = 0, kWgmmaSwizzle128B = 1, kWgmmaSwizzle64B = 2, kWgmmaSwizzle32B = 3 };

GDPA_HD unsigned long long make_wgmma_desc(unsigned smem_byte_addr, unsigned lbo_bytes, unsigned sbo_bytes,
                                           int swizzle) {
  unsigned long long d = 0;
  d |= (unsigned long long)((smem_byte_addr >> 4) & 0x3FFFu);
  d |= (unsigned long long)((lbo_bytes >> 4) & 0x3FFFu) << 16;
  d |= (unsigned long long)((sbo_bytes >> 4) & 0x3FFFu) << 32;
  d |= (unsigned long long)(swizzle & 0x3) << 62;
  return d;
}

// Field readers, for tests and debugging.
GDPA_HD unsigned wgmma_desc_addr(unsigned long long d) { return unsigned(d & 0x3FFFu) << 4; }
GDPA_HD unsigned wgmma_desc_lbo(unsigned long long d) { return unsigned((d >> 16) & 0x3FFFu) << 4; }
GDPA_HD unsigned wgmma_desc_sbo(unsigned long long d) { return unsigned((d >> 32) & 0x3FFFu) << 4; }
GDPA_HD int wgmma_desc_swizzle(unsigned long long d) { return int((d >> 62) & 0x3u); }
GDPA_HD int wgmma_desc_base_offset(unsigned long long d) { return int((d >> 49) & 0x7u); }

// Bytes of one 128B-swizzled panel row and of one 8-row swizzle atom.
constexpr unsigned kSw128RowBytes = 128;
constexpr unsigned kSw128AtomBytes = 1024;
// 16-bit elements in one panel row.
constexpr int kSw128PanelCols = 64;

// K-major operand in 128B-swizzled panels of `rows` rows: descriptor of the k16 slice `k_step`
// (0-based, 16 elements each) of the rows starting at `first_row` (a multiple of 8).
GDPA_HD unsigned long long sw128_kmajor_desc(unsigned tile_addr, int rows, int first_row, int k_step) {
  const unsigned panel = unsigned(k_step / 4) * unsigned(rows) * kSw128RowBytes;
  const unsigned in_row = unsigned(k_step % 4) * 32u;
  const unsigned addr = tile_addr + panel + unsigned(first_row) * kSw128RowBytes + in_row;
  return make_wgmma_desc(addr, 16, kSw128AtomBytes, kWgmmaSwizzle128B);
}

// MN-major operand (N contiguous) in 128B-swizzled panels of `rows` K-rows each: descriptor of the
// k16 slice `k_step` (rows 16*k_step ..), covering every panel along N through LBO.
GDPA_HD unsigned long long sw128_mnmajor_desc(unsigned tile_addr, int rows, int k_step) {
  const unsigned addr = tile_addr + unsigned(k_step) * 16u * kSw128RowBytes;
  return make_wgmma_desc(addr, unsigned(rows) * kSw128RowBytes, kSw128AtomBytes, kWgmmaSwizzle128B);
}

// ---- stepping a descriptor instead of re-encoding it ------------------------------------------
// The k16 slices of one operand tile differ only in the start-address field, and moving that field
// by a multiple of 16 bytes is a plain add on the descriptor's low word: shared-memory addresses
// stay below 228 KB, so (address >> 4) < 0x3900 never carries into the LBO field at bit 16. The
// kernels encode each tile's descriptor once and add a constant per wgmma: one uniform add instead
// of the add, shift, mask and or that re-encoding costs (ptxas cannot make that rewrite itself: it
// cannot prove the mask is a no-op), which sat on the dependency chain of every wgmma issue.
struct WgmmaDescBase {
  unsigned lo, hi;  // the two words of the descriptor at the tile's first byte
  // The descriptor `units` x 16 bytes further on.
  GDPA_HD unsigned long long at(unsigned units) const {
    return (static_cast<unsigned long long>(hi) << 32) | (lo + units);
  }
};

GDPA_HD WgmmaDescBase split_wgmma_desc(unsigned long long d) { return WgmmaDescBase{unsigned(d), unsigned(d >> 32)}; }

// sw128_kmajor_desc(tile, rows, first_row, k) ==
//     sw128_kmajor_base(tile + first_row * 128).at(sw128_kmajor_step(rows, k))
// for every tile inside shared memory (verify/tests/test_smem_desc.cpp checks all of them).
GDPA_HD WgmmaDescBase sw128_kmajor_base(unsigned tile_addr) {
  return split_wgmma_desc(make_wgmma_desc(tile_addr, 16, kSw128AtomBytes, kWgmmaSwizzle128B));
}
GDPA_HD unsigned sw128_kmajor_step(int rows, int k_step) {
  return (unsigned(k_step / 4) * unsigned(rows) * kSw128RowBytes + unsigned(k_step % 4) * 32u) >> 4;
}

// Likewise sw128_mnmajor_desc(tile, rows, k) == sw128_mnmajor_base(tile, rows).at(sw128_mnmajor_step(k)).
GDPA_HD WgmmaDescBase sw128_mnmajor_base(unsigned tile_addr, int rows) {
  return split_wgmma_desc(make_wgmma_desc(tile_addr, unsigned(rows) * kSw128RowBytes, kSw128AtomBytes, kWgmmaSwizzle128B));
}
GDPA_HD unsigned sw128_mnmajor_step(int k_step) { return (unsigned(k_step) * 16u * kSw128RowBytes) >> 4; }

// Byte offset, inside a 128B-swizzled panel, of 16-bit element (row, col) with col < 64: the
// 16-byte chunk index is XORed with row % 8 (what TMA writes and wgmma reads).
GDPA_HD unsigned sw128_offset(int row, int col) {
  const unsigned chunk = unsigned(col) >> 3;
  const unsigned swz = (chunk ^ (unsigned(row) & 7u));
  return unsigned(row) * kSw128RowBytes + swz * 16u + (unsigned(col) & 7u) * 2u;
}

}  // namespace gdpa
