// masks.cuh — which (query row i, key row j) pairs of one sequence contribute (spec section 2).
//
// The diagonal is bottom-right aligned as in FlashAttention: d0 = Lk - Lq, so with Lq == Lk causal
// is the usual j <= i, and with Lq < Lk the last query row sees every key.
// A window side < 0 is unbounded.
#pragma once
#include "portability.h"
#include "enums.h"

namespace gdpa {

GDPA_HD bool mask_allowed(int mask_kind, int i, int j, int len_q, int len_k, int window_left,
                          int window_right) {
  if (j < 0 || j >= len_k || i < 0 || i >= len_q) return false;
  const int diag = i + (len_k - len_q);
  if (mask_kind == kMaskCausal) return j <= diag;
  if (mask_kind == kMaskWindow) {
    const bool left_ok = window_left < 0 || j >= diag - window_left;
    const bool right_ok = window_right < 0 || j <= diag + window_right;
    return left_ok && right_ok;
  }
  return true;
}

// Range of key rows [*first, *last_excl) that query rows [row_begin, row_end) can see. Used to
// skip whole KV tiles; an empty range gives *first >= *last_excl.
GDPA_HD void mask_key_range(int mask_kind, int row_begin, int row_end, int len_q, int len_k,
                            int window_left, int window_right, int* first, int* last_excl) {
  int lo = 0, hi = len_k;
  const int d0 = len_k - len_q;
  if (mask_kind == kMaskCausal) {
    const int h = row_end - 1 + d0 + 1;
    hi = h < hi ? h : hi;
  } else if (mask_kind == kMaskWindow) {
    if (window_right >= 0) {
      const int h = row_end - 1 + d0 + window_right + 1;
      hi = h < hi ? h : hi;
    }
    if (window_left >= 0) {
      const int l = row_begin + d0 - window_left;
      lo = l > lo ? l : lo;
    }
  }
  *first = lo;
  *last_excl = hi;
}

// Range of query rows [*first, *last_excl) that can see key rows [col_begin, col_end) (backward).
GDPA_HD void mask_query_range(int mask_kind, int col_begin, int col_end, int len_q, int len_k,
                              int window_left, int window_right, int* first, int* last_excl) {
  int lo = 0, hi = len_q;
  const int d0 = len_k - len_q;
  if (mask_kind == kMaskCausal) {
    // j <= i + d0  <=>  i >= j - d0 ; the smallest j of the block decides.
    const int l = col_begin - d0;
    lo = l > lo ? l : lo;
  } else if (mask_kind == kMaskWindow) {
    if (window_right >= 0) {  // j <= i + d0 + right  <=>  i >= j - d0 - right
      const int l = col_begin - d0 - window_right;
      lo = l > lo ? l : lo;
    }
    if (window_left >= 0) {  // j >= i + d0 - left  <=>  i <= j - d0 + left
      const int h = col_end - 1 - d0 + window_left + 1;
      hi = h < hi ? h : hi;
    }
  }
  *first = lo;
  *last_excl = hi;
}

}  // namespace gdpa
