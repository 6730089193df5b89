// problem.cpp — validation and FLOP counting of a jagged GDPA problem.
#include "problem.h"

#include <algorithm>
#include <cmath>

#include "../kernels/common/masks.cuh"

namespace gdpa {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const std::string& msg) { throw ProblemError(msg); }

// Offsets of one tensor: batch + 1 entries, start at 0, never decrease, end at the row count.
void check_offsets(const std::vector<int>& cu, const char* name, const char* tensor, int64_t rows) {
  if (cu.size() < 2)
    fail(std::string(name) + " has " + str(int64_t(cu.size())) +
         " entries; it needs batch + 1 >= 2 (offsets of each sequence, then the total)");
  if (cu[0] != 0) fail(std::string(name) + " must start at 0 (got " + str(cu[0]) + ")");
  for (size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      fail(std::string(name) + " is not non-decreasing at index " + str(int64_t(i)) + " (" +
           str(cu[i - 1]) + " > " + str(cu[i]) + ")");
  if (rows >= 0 && cu.back() != rows)
    fail(std::string(name) + " ends at " + str(cu.back()) + " but " + tensor + " has " + str(rows) +
         " rows");
}

// Allowed (i, j) pairs of one sequence: for each query row the visible keys form one interval
// (masks.cuh), so a row costs O(1) and a sequence O(Lq) rather than O(Lq * Lk).
double sequence_pairs(const ProblemDesc& p, int len_q, int len_k) {
  if (len_q <= 0 || len_k <= 0) return 0.0;
  if (p.mask == kMaskNone) return double(len_q) * double(len_k);
  double pairs = 0.0;
  for (int i = 0; i < len_q; ++i) {
    int lo = 0, hi = 0;
    mask_key_range(p.mask, i, i + 1, len_q, len_k, p.window_left, p.window_right, &lo, &hi);
    lo = std::max(lo, 0);
    hi = std::min(hi, len_k);
    if (hi > lo) pairs += double(hi - lo);
  }
  return pairs;
}

}  // namespace

void validate(const ProblemDesc& p, int64_t q_rows, int64_t k_rows, bool backward) {
  if (p.heads_q <= 0) fail("heads_q must be positive (got " + str(p.heads_q) + ")");
  if (p.heads_kv <= 0) fail("heads_kv must be positive (got " + str(p.heads_kv) + ")");
  if (p.heads_q % p.heads_kv != 0)
    fail("heads_q (" + str(p.heads_q) + ") is not a multiple of heads_kv (" + str(p.heads_kv) + ")");
  if (p.head_dim != 64 && p.head_dim != 128)
    fail("head_dim " + str(p.head_dim) + " is not supported (supported: 64, 128)");
  if (p.dtype < 0 || p.dtype >= kNumDTypes)
    fail("dtype " + str(p.dtype) + " is not supported (supported: 0 = bf16, 1 = fp16)");
  if (p.activation < 0 || p.activation >= kNumActivations)
    fail("activation " + str(p.activation) + " is out of range (0.." + str(kNumActivations - 1) + ")");
  if (p.mask < 0 || p.mask >= kNumMaskKinds)
    fail("mask " + str(p.mask) + " is out of range (0 = none, 1 = causal, 2 = window)");
  if (p.mask == kMaskWindow && p.window_left < 0 && p.window_right < 0)
    fail("a window mask needs window_left or window_right >= 0 (both unbounded is mask none)");
  if (p.mask != kMaskWindow && (p.window_left >= 0 || p.window_right >= 0))
    fail("window_left/window_right (" + str(p.window_left) + ", " + str(p.window_right) +
         ") are set but the mask is not a window");
  if (!std::isfinite(p.logit_scale)) fail("logit_scale must be finite");
  if (!std::isfinite(p.out_scale)) fail("out_scale must be finite");

  check_offsets(p.cu_seqlens_q, "cu_seqlens_q", "Q", q_rows);
  check_offsets(p.cu_seqlens_k, "cu_seqlens_k", "K", k_rows);
  const int batch = p.batch();
  const int kv_batch = int(p.cu_seqlens_k.size()) - 1;
  if (p.kv_index.empty()) {
    if (kv_batch != batch)
      fail("cu_seqlens_k has " + str(kv_batch + 1) + " entries but cu_seqlens_q has " + str(batch + 1) +
           " (one KV sequence per query sequence unless kv_index is given)");
  } else {
    if (backward) fail("kv_index is forward-only (the backward of shared KV is not specified)");
    if (int(p.kv_index.size()) != batch)
      fail("kv_index has " + str(int64_t(p.kv_index.size())) + " entries but the batch has " +
           str(batch) + " query sequences");
    for (int b = 0; b < batch; ++b)
      if (p.kv_index[b] < 0 || p.kv_index[b] >= kv_batch)
        fail("kv_index[" + str(b) + "] = " + str(p.kv_index[b]) + " is out of range (" + str(kv_batch) +
             " KV sequences)");
  }
}

int ProblemDesc::max_len_q() const {
  int m = 0;
  for (int b = 0; b < batch(); ++b) m = std::max(m, len_q(b));
  return m;
}

// Over the KV sequences the query sequences actually read (all of them without kv_index).
int ProblemDesc::max_len_k() const {
  int m = 0;
  const int kv_batch = int(cu_seqlens_k.size()) - 1;
  for (int b = 0; b < batch(); ++b)
    if (kv_seq(b) >= 0 && kv_seq(b) < kv_batch) m = std::max(m, len_k(b));
  return m;
}

bool some_last_tile_half_empty(const ProblemDesc& p, bool keys, int block) {
  for (int b = 0; b < p.batch(); ++b) {
    const int tail = (keys ? p.len_k(b) : p.len_q(b)) % block;
    if (tail > 0 && tail <= block / 2) return true;
  }
  return false;
}

double allowed_pairs(const ProblemDesc& p) {
  double pairs = 0.0;
  for (int b = 0; b < p.batch(); ++b) pairs += sequence_pairs(p, p.len_q(b), p.len_k(b));
  return pairs;
}

double forward_flops(const ProblemDesc& p) {
  // Two GEMMs (QK^T and PV) of 2 * D FLOPs per (i, j) pair and head.
  return 4.0 * double(p.heads_q) * double(p.head_dim) * allowed_pairs(p);
}

}  // namespace gdpa
