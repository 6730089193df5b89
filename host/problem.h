// problem.h — one GDPA call described on the host: shapes, jagged offsets, variant choices.
//
// Validation lives here so every entry point (CLI, C++ API, tests) rejects bad input with the same
// one-line message before any device work starts.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../kernels/common/enums.h"

namespace gdpa {

// Thrown for invalid user input; the message is one line and names the offending value.
struct ProblemError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ProblemDesc {
  int heads_q = 4;
  int heads_kv = 4;
  int head_dim = 128;
  DType dtype = kBF16;
  Activation activation = kFastGelu;
  MaskKind mask = kMaskNone;
  int window_left = -1;  // < 0: unbounded (kMaskWindow only)
  int window_right = -1;
  float logit_scale = 1.0f;
  float out_scale = 1.0f;
  std::vector<int> cu_seqlens_q;  // batch + 1 entries, starts at 0, non-decreasing
  std::vector<int> cu_seqlens_k;  // KV sequences: batch + 1 entries (or kv_batch + 1 with kv_index)
  std::vector<int> kv_index;      // empty, or one entry per query sequence (forward only)

  int batch() const { return cu_seqlens_q.empty() ? 0 : int(cu_seqlens_q.size()) - 1; }
  int group() const { return heads_q / heads_kv; }
  int total_q() const { return cu_seqlens_q.empty() ? 0 : cu_seqlens_q.back(); }
  int total_k() const { return cu_seqlens_k.empty() ? 0 : cu_seqlens_k.back(); }
  int kv_seq(int b) const { return kv_index.empty() ? b : kv_index[b]; }
  int q_begin(int b) const { return cu_seqlens_q[b]; }
  int len_q(int b) const { return cu_seqlens_q[b + 1] - cu_seqlens_q[b]; }
  int k_begin(int b) const { return cu_seqlens_k[kv_seq(b)]; }
  int len_k(int b) const { return cu_seqlens_k[kv_seq(b) + 1] - cu_seqlens_k[kv_seq(b)]; }
  int max_len_q() const;
  int max_len_k() const;
  // Elements per token row.
  int64_t q_row() const { return int64_t(heads_q) * head_dim; }
  int64_t k_row() const { return int64_t(heads_kv) * head_dim; }
};

// Throws ProblemError on: non-monotone / negative / out-of-range offsets, offsets not starting at 0,
// a last offset that does not match the tensor's row count (when rows >= 0 is given), heads_q %
// heads_kv != 0, non-positive heads, an unsupported head dim (64, 128) or dtype, an activation or
// mask out of range, kv_index out of range or given for the backward, a bad window.
void validate(const ProblemDesc& p, int64_t q_rows = -1, int64_t k_rows = -1, bool backward = false);

// Forward FLOPs by the seed's convention (spec 5): 4 * Hq * D * allowed (i, j) pairs.
double forward_flops(const ProblemDesc& p);
// Number of allowed (i, j) pairs summed over sequences (one head).
double allowed_pairs(const ProblemDesc& p);

// Some sequence's last tile of `block` queries (keys: of `block` keys) holds only 1..block / 2 of
// them, so the tile's second half lies wholly past the sequence's end (the kernels' empty-half skips).
bool some_last_tile_half_empty(const ProblemDesc& p, bool keys, int block);

}  // namespace gdpa
