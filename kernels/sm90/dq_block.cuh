// dq_block.cuh — from a dQ accumulator slot (bwd_config.h) back to the rows of dQ it holds: the
// one lookup the two places that finish dQ share (the dq_convert kernel, and in the deterministic
// mode the backward kernel's converter warps).
#pragma once
#include "../common/params.h"
#include "bwd_config.h"

namespace gdpa::sm90 {

struct DqSlotRows {
  int q_begin;  // global row of the sequence's first query
  int m0;       // sequence-local first row of the slot's query tile
  int rows;     // rows of the tile inside the sequence; <= 0 for a padding slot
};

// The sequence owning `slot` is the last b whose first slot is <= slot (slot starts are
// non-decreasing in b; sequences with Lq = 0 own no slot and are skipped by "last").
GDPA_DEVICE DqSlotRows dq_slot_rows(const GdpaParams& p, int slot) {
  int lo = 0, hi = p.batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (dq_slot_begin(p.cu_seqlens_q[mid], mid) <= slot)
      lo = mid;
    else
      hi = mid - 1;
  }
  DqSlotRows r;
  r.q_begin = p.cu_seqlens_q[lo];
  const int len_q = p.cu_seqlens_q[lo + 1] - r.q_begin;
  r.m0 = (slot - dq_slot_begin(r.q_begin, lo)) * kBwdBlockM;
  r.rows = min(kBwdBlockM, len_q - r.m0);
  return r;
}

}  // namespace gdpa::sm90
