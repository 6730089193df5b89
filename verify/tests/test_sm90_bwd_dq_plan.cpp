// test_sm90_bwd_dq_plan.cpp — the dQ follower's list (kBwdDqFollow, host/sm90_bwd_dq_plan.h)
// without a GPU: every (query tile, head) block of the batch exactly once, with its rows, head and
// the semaphore count the writer's protocol reaches (0 where no KV tile adds), sorted by the list
// position of the block's last contributor, so the follower waits in the order blocks complete.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "../../host/generator.h"
#include "../../host/scheduler.h"
#include "../../host/sm90_bwd.h"
#include "../../host/sm90_bwd_dq_plan.h"
#include "../../kernels/common/masks.cuh"
#include "../../kernels/sm90/bwd_config.h"
#include "jagged_problem.h"

using namespace gdpa;
using namespace gdpa::sm90;

namespace {

ProblemDesc plan_problem(MaskKind mask, int heads_q, int heads_kv, uint64_t seed) {
  ProblemDesc p = jagged_problem(60, 900, seed, heads_q, heads_kv);
  p.mask = mask;
  p.window_left = 150;
  p.window_right = 20;
  if (mask == kMaskCausal)  // keys shorter than queries: the first query tiles see no key
    for (int b = 0; b < p.batch(); ++b) p.cu_seqlens_k[b + 1] = p.cu_seqlens_k[b] + p.len_q(b) / 2;
  return p;
}

// What the list must hold, derived here by brute force over keys (mask_allowed), independently of
// the mask_key_range arithmetic the list uses.
void check_items(const ProblemDesc& p, const std::vector<WorkTile>& tiles) {
  const std::vector<DqConvertItem> items = dq_follow_items(p, tiles);
  std::map<std::tuple<int, int, int>, int> entry_of;  // (batch, kv head, KV tile) -> position
  for (size_t e = 0; e < tiles.size(); ++e) entry_of[{tiles[e].batch, tiles[e].head, tiles[e].block}] = int(e);
  struct Expect {
    int row0, head_rows, count, last_entry;
  };
  std::map<int, Expect> expected;
  for (int b = 0; b < p.batch(); ++b) {
    for (int r0 = 0; r0 < p.len_q(b); r0 += kBwdBlockM) {
      const int rows = std::min(kBwdBlockM, p.len_q(b) - r0);
      std::set<int> kv_tiles;  // KV tiles with a key some row of the block may see
      for (int i = r0; i < r0 + rows; ++i)
        for (int j = 0; j < p.len_k(b); ++j)
          if (mask_allowed(p.mask, i, j, p.len_q(b), p.len_k(b), p.window_left, p.window_right))
            kv_tiles.insert(j / kBwdBlockN);
      for (int h = 0; h < p.heads_q; ++h) {
        const long long block = dq_block_index(dq_slot_begin(p.q_begin(b), b) + r0 / kBwdBlockM, h, p.heads_q);
        int last_entry = -1;
        if (!kv_tiles.empty()) {
          const auto e = entry_of.find({b, h / p.group(), *kv_tiles.rbegin()});
          REQUIRE(e != entry_of.end());
          last_entry = e->second;
        }
        expected[int(block)] = Expect{p.q_begin(b) + r0, dq_item_head_rows(h, rows), int(kv_tiles.size()), last_entry};
      }
    }
  }
  REQUIRE(!expected.empty());
  CHECK(items.size() == expected.size());
  std::set<int> seen;
  int previous_entry = -1;
  for (const DqConvertItem& it : items) {
    CHECK(seen.insert(it.block).second);
    const auto x = expected.find(it.block);
    REQUIRE(x != expected.end());
    CHECK(it.row0 == x->second.row0);
    CHECK(it.head_rows == x->second.head_rows);
    CHECK(it.count == x->second.count);
    CHECK(x->second.last_entry >= previous_entry);  // sorted by when the block completes
    previous_entry = x->second.last_entry;
  }
}

}  // namespace

TEST_CASE("sm90 backward: the dQ follower's list has every block once, its count, in completion order") {
  for (MaskKind mask : {kMaskNone, kMaskCausal, kMaskWindow}) {
    for (auto [hq, hk] : {std::pair{4, 4}, std::pair{4, 2}, std::pair{8, 1}}) {
      const ProblemDesc p = plan_problem(mask, hq, hk, 17 + uint64_t(mask) * 7 + uint64_t(hk));
      for (SchedulePolicy policy : {SchedulePolicy::kGridOrder, SchedulePolicy::kZigzag}) {
        CAPTURE(int(mask));
        CAPTURE(hq);
        CAPTURE(hk);
        CAPTURE(int(policy));
        std::vector<WorkTile> tiles = build_backward_tiles(p, kBwdBlockM, kBwdBlockN, policy, 130);
        sm90_bwd_order_for_determinism(tiles);
        check_items(p, tiles);
      }
    }
  }
}

TEST_CASE("sm90 backward: the dQ follower's list refuses a tile list without a contributing tile") {
  const ProblemDesc p = plan_problem(kMaskNone, 4, 4, 5);
  std::vector<WorkTile> tiles = build_backward_tiles(p, kBwdBlockM, kBwdBlockN, SchedulePolicy::kGridOrder, 8);
  const auto gone = std::find_if(tiles.begin(), tiles.end(), [](const WorkTile& t) { return t.block == 1; });
  REQUIRE(gone != tiles.end());
  tiles.erase(gone);
  CHECK_THROWS(dq_follow_items(p, tiles));
}

TEST_CASE("sm90 backward: the SMs left to the dQ follower follow the KV tiles per query block") {
  // k = 32 / R from 2 to 8 (host/sm90_bwd.cpp sm90_bwd_follow_sms), R the KV tiles a 64-row query
  // block meets: uniform self-attention of length L has R = L / 128.
  auto k_of = [](int len, const Sm90Options& o, int sms) {
    ProblemDesc p;
    p.heads_q = p.heads_kv = 4;
    p.head_dim = 128;
    p.cu_seqlens_q = p.cu_seqlens_k = offsets_from_lengths(std::vector<int>(16, len));
    return sm90_bwd_follow_sms(p, build_backward_tiles(p, kBwdBlockM, kBwdBlockN, SchedulePolicy::kGridOrder, sms),
                               o, sms);
  };
  const Sm90Options o;
  CHECK(k_of(512, o, 132) == 8);   // R = 4
  CHECK(k_of(1024, o, 132) == 4);  // R = 8
  CHECK(k_of(2048, o, 132) == 2);  // R = 16
  CHECK(k_of(8192, o, 132) == 2);  // at least two
  CHECK(k_of(256, o, 132) == 8);   // at most eight
  CHECK(k_of(512, o, 40) == 5);    // a small device keeps 7/8 of its SMs
  Sm90Options by_hand;
  by_hand.dq_follow_sms = 3;
  CHECK(k_of(512, by_hand, 132) == 3);
  by_hand.dq_follow_sms = 132;  // nothing left for the backward: one clear error
  CHECK_THROWS_AS(k_of(512, by_hand, 132), ProblemError);
}
