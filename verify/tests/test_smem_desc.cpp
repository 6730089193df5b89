// Unit tests of the Hopper shared-memory matrix descriptor encoder (ptx/smem_desc.h): a wrong bit
// here shows up on the GPU as plausible-looking garbage, so every field is pinned on the host.
#include <doctest/doctest.h>

#include <set>

#include "../../ptx/smem_desc.h"

using namespace gdpa;

TEST_CASE("wgmma descriptor fields land in their bits (PTX matrix-descriptor format)") {
  const unsigned long long d = make_wgmma_desc(0x12340, 0x560, 0x400, kWgmmaSwizzle128B);
  CHECK((d & 0x3FFFull) == (0x12340ull >> 4));
  CHECK(((d >> 16) & 0x3FFFull) == (0x560ull >> 4));
  CHECK(((d >> 32) & 0x3FFFull) == (0x400ull >> 4));
  CHECK((d >> 62) == 1ull);                // 128-byte swizzle is layout type 1 on Hopper
  CHECK(((d >> 49) & 0x7ull) == 0ull);     // base offset 0: atoms are 1024-byte aligned
  CHECK(((d >> 14) & 0x3ull) == 0ull);     // reserved bits stay clear
  CHECK(((d >> 30) & 0x3ull) == 0ull);
  CHECK(((d >> 46) & 0x7ull) == 0ull);     // bits 46-48: Hopper has no version field (Blackwell sets 46)
  CHECK(wgmma_desc_addr(d) == 0x12340u);
  CHECK(wgmma_desc_lbo(d) == 0x560u);
  CHECK(wgmma_desc_sbo(d) == 0x400u);
  CHECK(wgmma_desc_swizzle(d) == kWgmmaSwizzle128B);
  CHECK(wgmma_desc_base_offset(d) == 0);
}

TEST_CASE("each swizzle mode has its own code") {
  CHECK(wgmma_desc_swizzle(make_wgmma_desc(0, 0, 0, kWgmmaSwizzleNone)) == 0);
  CHECK(wgmma_desc_swizzle(make_wgmma_desc(0, 0, 0, kWgmmaSwizzle64B)) == 2);
  CHECK(wgmma_desc_swizzle(make_wgmma_desc(0, 0, 0, kWgmmaSwizzle32B)) == 3);
}

TEST_CASE("addresses are 16-byte granular and wrap in 14 bits (the 256 KB shared window)") {
  CHECK(wgmma_desc_addr(make_wgmma_desc(0x3FFF0, 0, 0, 1)) == 0x3FFF0u);
  CHECK(wgmma_desc_addr(make_wgmma_desc(0x40000, 0, 0, 1)) == 0u);
  CHECK(wgmma_desc_addr(make_wgmma_desc(0x1234F, 0, 0, 1)) == 0x12340u);
}

TEST_CASE("K-major SW128 operand: 32-byte steps inside a panel, then the next panel") {
  const unsigned tile = 0x8000;  // 1024-aligned
  const int rows = 128;
  for (int ks = 0; ks < 8; ++ks) {
    const unsigned long long d = sw128_kmajor_desc(tile, rows, 0, ks);
    const unsigned expect = tile + unsigned(ks / 4) * rows * 128u + unsigned(ks % 4) * 32u;
    CHECK(wgmma_desc_addr(d) == expect);
    CHECK(wgmma_desc_sbo(d) == 1024u);  // next 8-row group
    CHECK(wgmma_desc_swizzle(d) == kWgmmaSwizzle128B);
  }
  // The second consumer warpgroup's 64 rows start 64 * 128 bytes into every panel.
  CHECK(wgmma_desc_addr(sw128_kmajor_desc(tile, rows, 64, 5)) == tile + rows * 128u + 64u * 128u + 32u);
}

TEST_CASE("MN-major SW128 operand: LBO is the panel stride along N, k16 steps are 16 rows") {
  const unsigned tile = 0x10000;
  for (int rows : {64, 128, 176}) {
    for (int kk = 0; kk < rows / 16; ++kk) {
      const unsigned long long d = sw128_mnmajor_desc(tile, rows, kk);
      CHECK(wgmma_desc_addr(d) == tile + unsigned(kk) * 2048u);
      CHECK(wgmma_desc_lbo(d) == unsigned(rows) * 128u);
      CHECK(wgmma_desc_sbo(d) == 1024u);
    }
  }
}

// The kernels encode a tile's descriptor once and step it (WgmmaDescBase::at): that must give the
// bits of encoding every slice afresh, for every 1024-aligned tile whose slices lie inside the
// 228 KB of shared memory an SM has.
TEST_CASE("stepped descriptors equal freshly encoded ones for every tile in shared memory") {
  constexpr unsigned kSmemBytes = 228u * 1024u;
  int compared = 0;
  for (int rows : {64, 128, 176}) {
    const unsigned tile_bytes = 2u * unsigned(rows) * 128u;  // D = 128: two 64-column panels
    for (unsigned tile = 0; tile + tile_bytes <= kSmemBytes; tile += 1024) {
      for (int first_row : {0, 64}) {
        if (first_row >= rows) continue;
        const WgmmaDescBase base = sw128_kmajor_base(tile + unsigned(first_row) * 128u);
        for (int ks = 0; ks < 8; ++ks) {
          REQUIRE(base.at(sw128_kmajor_step(rows, ks)) == sw128_kmajor_desc(tile, rows, first_row, ks));
          ++compared;
        }
      }
      const WgmmaDescBase mn = sw128_mnmajor_base(tile, rows);
      for (int kk = 0; kk < rows / 16; ++kk) {
        REQUIRE(mn.at(sw128_mnmajor_step(kk)) == sw128_mnmajor_desc(tile, rows, kk));
        ++compared;
      }
    }
  }
  CHECK(compared > 4000);
  // Past the 18-bit shared window the encoders wrap the address field and stepping would carry
  // into LBO instead: the equality is a property of shared-memory addresses, not of any integer.
  CHECK(sw128_kmajor_base(0x3FC00).at(sw128_kmajor_step(128, 7)) != sw128_kmajor_desc(0x3FC00, 128, 0, 7));
}

TEST_CASE("the 128-byte swizzle maps an 8 x 64 atom onto 1024 bytes one-to-one") {
  std::set<unsigned> seen;
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 64; ++c) {
      const unsigned off = sw128_offset(r, c);
      CHECK(off < 1024u);
      CHECK(off % 2 == 0u);
      seen.insert(off);
    }
  CHECK(seen.size() == 512u);
  // Row r keeps its 128-byte line; its 16-byte chunk index is XORed with r % 8.
  CHECK(sw128_offset(3, 0) == 3u * 128u + (0u ^ 3u) * 16u);
  CHECK(sw128_offset(5, 17) == 5u * 128u + (2u ^ 5u) * 16u + 1u * 2u);
  CHECK(sw128_offset(9, 8) == 9u * 128u + (1u ^ 1u) * 16u);  // the pattern repeats every 8 rows
}
