// sm90_bwd_dq_plan.cpp — the follower's list of dQ blocks (sm90_bwd_dq_plan.h).
#include "sm90_bwd_dq_plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "../kernels/common/masks.cuh"

namespace gdpa {

std::vector<sm90::DqConvertItem> dq_follow_items(const ProblemDesc& p, const std::vector<WorkTile>& tiles) {
  std::map<std::tuple<int, int, int>, int> entry_of;  // (sequence, KV head, KV tile) -> list position
  for (size_t e = 0; e < tiles.size(); ++e) entry_of[{tiles[e].batch, tiles[e].head, tiles[e].block}] = int(e);
  std::vector<std::pair<int, sm90::DqConvertItem>> keyed;  // (position of the last contributor, item)
  const int group = p.group();
  for (int b = 0; b < p.batch(); ++b) {
    const int len_q = p.len_q(b), len_k = p.len_k(b), q_begin = p.q_begin(b);
    const long long slot0 = sm90::dq_slot_begin(q_begin, b);
    for (int r0 = 0; r0 < len_q; r0 += sm90::kBwdBlockM) {
      int first, last;
      mask_key_range(p.mask, r0, std::min(r0 + sm90::kBwdBlockM, len_q), len_q, len_k, p.window_left, p.window_right,
                     &first, &last);
      const bool added = last > first;
      const int n_lo = added ? first / sm90::kBwdBlockN : 0, n_hi = added ? (last - 1) / sm90::kBwdBlockN : -1;
      const int rows = std::min(sm90::kBwdBlockM, len_q - r0);
      for (int hk = 0; hk < p.heads_kv; ++hk) {
        int key = -1;
        if (added) {
          for (int n = n_lo; n <= n_hi; ++n)
            if (!entry_of.count({b, hk, n}))
              throw std::logic_error("dq_follow_items: a contributing KV tile is missing from the tile list");
          key = entry_of.at({b, hk, n_hi});
        }
        for (int g = 0; g < group; ++g) {
          const int head = hk * group + g;
          const long long block = sm90::dq_block_index(slot0 + r0 / sm90::kBwdBlockM, head, p.heads_q);
          if (block > 0x7fffffffll) throw std::logic_error("dq_follow_items: block index past 2^31");
          keyed.push_back({key, sm90::DqConvertItem{int(block), q_begin + r0, sm90::dq_item_head_rows(head, rows),
                                                    n_hi - n_lo + 1}});
        }
      }
    }
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<sm90::DqConvertItem> items;
  items.reserve(keyed.size());
  for (const auto& k : keyed) items.push_back(k.second);
  return items;
}

}  // namespace gdpa
