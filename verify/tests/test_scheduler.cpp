// test_scheduler.cpp — tile lists and load balance of host/scheduler.h.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <tuple>

#include "../../host/generator.h"
#include "../../host/scheduler.h"

using namespace gdpa;

namespace {

const SchedulePolicy kPolicies[] = {SchedulePolicy::kGridOrder, SchedulePolicy::kLongestFirst,
                                    SchedulePolicy::kZigzag};

ProblemDesc with_lengths(const std::vector<int>& lq, const std::vector<int>& lk, int heads_q = 4,
                         int heads_kv = 4) {
  ProblemDesc p;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.cu_seqlens_q = offsets_from_lengths(lq);
  p.cu_seqlens_k = offsets_from_lengths(lk);
  return p;
}

auto key(const WorkTile& t) { return std::make_tuple(t.batch, t.head, t.block, t.work); }

std::vector<WorkTile> sorted_by_key(std::vector<WorkTile> v) {
  std::sort(v.begin(), v.end(), [](const WorkTile& a, const WorkTile& b) { return key(a) < key(b); });
  return v;
}

bool same_tiles(const std::vector<WorkTile>& a, const std::vector<WorkTile>& b) {
  const auto x = sorted_by_key(a), y = sorted_by_key(b);
  return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(),
                                            [](const WorkTile& s, const WorkTile& t) { return key(s) == key(t); });
}

// The per-block work of head 0 of sequence b, in block order.
std::vector<int> works_of(const std::vector<WorkTile>& tiles, int b) {
  std::vector<int> w;
  for (const WorkTile& t : tiles)
    if (t.batch == b && t.head == 0) w.push_back(t.work);
  return w;
}

}  // namespace

TEST_CASE("forward tiles: counts, grid order, no tile for Lq = 0") {
  const ProblemDesc p = with_lengths({0, 1, 128, 129, 300}, {10, 10, 300, 300, 300});
  const auto tiles = build_forward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 132);
  CHECK(tiles.size() == size_t((0 + 1 + 1 + 2 + 3) * 4));
  CHECK(std::none_of(tiles.begin(), tiles.end(), [](const WorkTile& t) { return t.batch == 0; }));
  // (batch, head, block) nested.
  CHECK(key(tiles[0]) == std::make_tuple(1, 0, 0, 1));
  CHECK(key(tiles[1]) == std::make_tuple(1, 1, 0, 1));
  CHECK(key(tiles[4]) == std::make_tuple(2, 0, 0, 3));
  CHECK(key(tiles[8]) == std::make_tuple(3, 0, 0, 3));
  CHECK(key(tiles[9]) == std::make_tuple(3, 0, 1, 3));
  CHECK(key(tiles[10]) == std::make_tuple(3, 1, 0, 3));
  CHECK(key(tiles.back()) == std::make_tuple(4, 3, 2, 3));
}

TEST_CASE("forward tiles: masks reduce work; a tile that sees no key still exists") {
  ProblemDesc p = with_lengths({300}, {300});
  CHECK(works_of(build_forward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 8), 0) == std::vector<int>{3, 3, 3});
  p.mask = kMaskCausal;
  CHECK(works_of(build_forward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 8), 0) == std::vector<int>{1, 2, 3});
  CHECK(works_of(build_forward_tiles(p, 128, 64, SchedulePolicy::kGridOrder, 8), 0) == std::vector<int>{2, 4, 5});
  p.mask = kMaskWindow;
  p.window_left = 0;
  p.window_right = 0;  // the diagonal only
  CHECK(works_of(build_forward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 8), 0) == std::vector<int>{1, 1, 1});
  CHECK(works_of(build_forward_tiles(p, 128, 96, SchedulePolicy::kGridOrder, 8), 0) == std::vector<int>{2, 2, 2});

  // Causal with Lq > Lk (bottom-right diagonal): the first 200 query rows see no key at all.
  ProblemDesc q = with_lengths({300}, {100});
  q.mask = kMaskCausal;
  const auto tiles = build_forward_tiles(q, 128, 64, SchedulePolicy::kGridOrder, 8);
  CHECK(works_of(tiles, 0) == std::vector<int>{0, 1, 2});
  CHECK(tile_cost(tiles[0]) == 1);
  // Lk = 0: every query tile writes zeros.
  const auto empty_k = build_forward_tiles(with_lengths({100}, {0}), 64, 64, SchedulePolicy::kZigzag, 8);
  CHECK(empty_k.size() == 2 * 4);
  CHECK(std::all_of(empty_k.begin(), empty_k.end(), [](const WorkTile& t) { return t.work == 0; }));
}

TEST_CASE("backward tiles: KV tiles, group factor, masks, Lq = 0") {
  ProblemDesc p = with_lengths({300, 0, 50}, {300, 70, 0}, 4, 2);  // group 2
  auto tiles = build_backward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 8);
  CHECK(tiles.size() == size_t((3 + 1 + 0) * 2));
  CHECK(works_of(tiles, 0) == std::vector<int>{6, 6, 6});  // 3 query tiles x 2 heads
  CHECK(works_of(tiles, 1) == std::vector<int>{0});        // Lq = 0: still writes zero dK, dV
  CHECK(key(tiles[3]) == std::make_tuple(0, 1, 0, 6));     // (batch, KV head, block) nested
  p.mask = kMaskCausal;
  tiles = build_backward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 8);
  CHECK(works_of(tiles, 0) == std::vector<int>{6, 4, 2});
  p.kv_index = {0, 0, 0};
  CHECK_THROWS_AS(build_backward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 8), ProblemError);
}

TEST_CASE("every policy lists every tile exactly once") {
  ProblemDesc p = make_problem(BatchShape{300, 1024, 0.5, 0}, 21);
  p.mask = kMaskCausal;
  for (bool backward : {false, true}) {
    const auto grid = backward ? build_backward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 132)
                               : build_forward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 132);
    for (SchedulePolicy policy : kPolicies) {
      for (int sms : {1, 7, 132, 100000}) {
        INFO("backward " << backward << " policy " << schedule_policy_name(policy) << " sms " << sms);
        const auto tiles = backward ? build_backward_tiles(p, 128, 128, policy, sms)
                                    : build_forward_tiles(p, 128, 128, policy, sms);
        CHECK(same_tiles(tiles, grid));
      }
    }
  }
}

TEST_CASE("longest-first is a stable descending sort by cost") {
  ProblemDesc p = make_problem(BatchShape{64, 512, 0.5, 0}, 4);
  const auto grid = build_forward_tiles(p, 64, 64, SchedulePolicy::kGridOrder, 16);
  const auto lf = build_forward_tiles(p, 64, 64, SchedulePolicy::kLongestFirst, 16);
  auto expected = grid;
  std::stable_sort(expected.begin(), expected.end(),
                   [](const WorkTile& a, const WorkTile& b) { return tile_cost(a) > tile_cost(b); });
  REQUIRE(lf.size() == expected.size());
  for (size_t i = 0; i < lf.size(); ++i) CHECK(key(lf[i]) == key(expected[i]));
}

TEST_CASE("zigzag deals the sorted list in snake order under the striding contract") {
  ProblemDesc p = make_problem(BatchShape{50, 1024, 0.5, 0}, 8);
  const int W = 7;
  const auto sorted = build_forward_tiles(p, 128, 128, SchedulePolicy::kLongestFirst, W);
  const auto zz = build_forward_tiles(p, 128, 128, SchedulePolicy::kZigzag, W);
  REQUIRE(zz.size() == sorted.size());
  const size_t full_rounds = zz.size() / W;
  REQUIRE(full_rounds >= 2);
  for (size_t r = 0; r < full_rounds; ++r)
    for (size_t w = 0; w < size_t(W); ++w) {
      // Worker w's r-th tile is zz[r * W + w] (CTA w strides by the grid).
      const size_t from = r * W + (r % 2 == 0 ? w : W - 1 - w);
      CHECK(key(zz[r * W + w]) == key(sorted[from]));
    }
}

TEST_CASE("per_sm_load sums costs under the striding contract") {
  const std::vector<WorkTile> tiles = {{0, 0, 0, 5}, {0, 0, 1, 0}, {0, 0, 2, 1}, {0, 0, 3, 3}};
  const LoadStats s = per_sm_load(tiles, 2);  // worker 0: 5 + 1, worker 1: 1 (work 0 costs 1) + 3
  CHECK(s.max_work == 6);
  CHECK(s.mean_work == 5);
  CHECK(s.max_over_mean == doctest::Approx(1.2));
  CHECK(per_sm_load({}, 4).max_over_mean == 1.0);
  CHECK(per_sm_load(tiles, 8).max_over_mean == doctest::Approx(5.0 / (10.0 / 8)));  // idle workers count
  CHECK(persistent_grid(3, 132) == 3);
  CHECK(persistent_grid(1000, 132) == 132);
}

TEST_CASE("zigzag balances the seed's jagged batch; grid order does not") {
  // B = 1152, L = 1024, s = 0.5, 4 heads, 128 x 128 tiles, 132 SMs (H100 SXM).
  ProblemDesc p = make_problem(BatchShape{1152, 1024, 0.5, 0}, 2024);
  for (MaskKind mask : {kMaskNone, kMaskCausal}) {
    p.mask = mask;
    INFO("mask " << int(mask));
    const LoadStats grid = per_sm_load(build_forward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 132), 132);
    const LoadStats zz = per_sm_load(build_forward_tiles(p, 128, 128, SchedulePolicy::kZigzag, 132), 132);
    const LoadStats bwd = per_sm_load(build_backward_tiles(p, 128, 128, SchedulePolicy::kZigzag, 132), 132);
    INFO("max/mean: grid " << grid.max_over_mean << ", zigzag " << zz.max_over_mean << ", backward zigzag "
                           << bwd.max_over_mean);
    CHECK(zz.max_over_mean < 1.01);
    CHECK(bwd.max_over_mean < 1.01);
    CHECK(grid.max_over_mean > zz.max_over_mean + 0.02);
  }
}

TEST_CASE("building 74k tiles takes milliseconds") {
  const ProblemDesc p = make_problem(BatchShape{1152, 2048, 1.0, 0}, 1);
  const auto t0 = std::chrono::steady_clock::now();
  const auto tiles = build_forward_tiles(p, 128, 128, SchedulePolicy::kZigzag, 132);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(tiles.size() == size_t(1152) * 4 * 16);
  CHECK(ms < 500.0);  // generous: a shared CI core; typically a few ms
}

TEST_CASE("scheduler arguments and policy names") {
  const ProblemDesc p = with_lengths({10}, {10});
  CHECK_THROWS_AS(build_forward_tiles(p, 0, 128, SchedulePolicy::kGridOrder, 8), ProblemError);
  CHECK_THROWS_AS(build_backward_tiles(p, 128, -1, SchedulePolicy::kGridOrder, 8), ProblemError);
  CHECK_THROWS_AS(build_forward_tiles(p, 128, 128, SchedulePolicy::kZigzag, 0), ProblemError);
  for (SchedulePolicy policy : kPolicies) CHECK(parse_schedule_policy(schedule_policy_name(policy)) == policy);
  CHECK_THROWS_AS(parse_schedule_policy("random"), ProblemError);
}

TEST_CASE("tile padding efficiency: useful over computed score pairs") {
  CHECK(tile_padding_efficiency(with_lengths({128, 256}, {128, 384}), 128, 128) == doctest::Approx(1.0));
  // 64 x 64 useful pairs in one 128 x 128 tile.
  CHECK(tile_padding_efficiency(with_lengths({64}, {64}), 128, 128) == doctest::Approx(0.25));
  // Rows pad to 64 in the backward's 64-row tiles: 100 x 200 in 128 x 256.
  CHECK(tile_padding_efficiency(with_lengths({100}, {200}), 64, 128) == doctest::Approx(20000.0 / 32768.0));
  // A sequence with no queries costs nothing and adds nothing.
  CHECK(tile_padding_efficiency(with_lengths({0, 128}, {50, 128}), 128, 128) == doctest::Approx(1.0));
  CHECK(tile_padding_efficiency(with_lengths({0}, {0}), 128, 128) == doctest::Approx(1.0));
}

TEST_CASE("tile-time model: useful pairs per modelled step") {
  const TileTimeModel boundary{0.9, 0.5};
  // Whole tiles of four key blocks, every pair useful: 4 / (4 + 0.9) of a pair per slot and step.
  CHECK(modelled_useful_rate(with_lengths({256, 128}, {512, 512}), 128, 128, boundary) ==
        doctest::Approx(4.0 / 4.9));
  // A whole tile and a half-empty one (64 rows) against 512 keys: 128 + 64 rows of 512 useful
  // keys over (4 + 0.9) + (0.5 * 4 + 0.9) steps of 128 x 128 pairs, per head.
  const ProblemDesc p = with_lengths({192}, {512});
  CHECK(modelled_useful_rate(p, 128, 128, boundary) == doctest::Approx(192.0 * 512 / (7.8 * 128 * 128)));
  // The same half tile at a whole tile's cost, and with a 65-row last tile (not half-empty).
  CHECK(modelled_useful_rate(p, 128, 128, {0.0, 1.0}) == doctest::Approx(192.0 * 512 / (8.0 * 128 * 128)));
  CHECK(modelled_useful_rate(with_lengths({193}, {512}), 128, 128, boundary) ==
        doctest::Approx(193.0 * 512 / (9.8 * 128 * 128)));
  // Key padding: 100 keys fill one block of 128, and the rate counts only the 100.
  CHECK(modelled_useful_rate(with_lengths({128}, {100}), 128, 128, {0.0, 1.0}) == doctest::Approx(100.0 / 128));
  // Nothing computed.
  CHECK(modelled_useful_rate(with_lengths({0}, {0}), 128, 128, boundary) == 0.0);
}

TEST_CASE("tile-time model: the parity of two sets and the longest boundary that keeps it") {
  // Dense: two whole tiles of four blocks, rate 4 / (4 + b). Half: a whole tile and a half-empty one,
  // rate 192 x 512 / ((4 + b + 2 + b) x 128 x 128) = 6 / (6 + 2b). With equal limits the parity is
  // (24 + 6b) / (24 + 8b): 1 with no boundary, 0.95 at b = 0.75.
  const ProblemDesc dense = with_lengths({256}, {512}), half = with_lengths({192}, {512});
  for (double b : {0.0, 0.3, 0.9})
    CHECK(modelled_parity(half, 1.0, dense, 1.0, 128, 128, {b, 0.5}) == doctest::Approx((24 + 6 * b) / (24 + 8 * b)));
  // Limits scale it: a half set with half the limit doubles its fraction.
  CHECK(modelled_parity(half, 0.5, dense, 1.0, 128, 128, {0.0, 0.5}) == doctest::Approx(2.0));
  CHECK(largest_boundary_reaching(0.95, half, 1.0, dense, 1.0, 128, 128, 0.5) == doctest::Approx(0.75).epsilon(1e-6));
  CHECK(largest_boundary_reaching(1.01, half, 1.0, dense, 1.0, 128, 128, 0.5) == -1.0);  // not even at b = 0
  CHECK(largest_boundary_reaching(0.50, half, 1.0, dense, 1.0, 128, 128, 0.5) == 2.0);   // at every b searched
}

TEST_CASE("per-CTA schedule: the query tiles of a short-KV (sequence, head) stay together, pairs included") {
  // Lq = 256 / Lk = 256 (two query tiles, two KV blocks: fits a two-block ring), Lq = 384 / Lk = 128
  // (three tiles, one block), Lq = 100 (one tile) and Lk = 384 (three blocks: too many to keep).
  const ProblemDesc p = with_lengths({256, 384, 100, 256}, {256, 128, 100, 384}, 2, 2);
  for (const auto& [policy, half_cost] : {std::make_pair(SchedulePolicy::kGridOrder, 1.0),
                                           std::make_pair(SchedulePolicy::kLongestFirst, 1.0),
                                           std::make_pair(SchedulePolicy::kZigzag, 1.0),
                                           std::make_pair(SchedulePolicy::kZigzag, 0.75)}) {
    const CtaSchedule s = build_forward_schedule(p, 128, 128, policy, 3, 2, half_cost);
    CAPTURE(schedule_policy_name(policy));
    CAPTURE(half_cost);
    REQUIRE(s.ctas() >= 1);
    CHECK(same_tiles(s.tiles, build_forward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 3)));
    // Where each (sequence, head)'s tiles landed: one CTA, consecutive, for sequences 0 and 1.
    for (int b : {0, 1}) {
      for (int h = 0; h < 2; ++h) {
        std::vector<int> at;
        for (int i = 0; i < int(s.tiles.size()); ++i)
          if (s.tiles[size_t(i)].batch == b && s.tiles[size_t(i)].head == h) at.push_back(i);
        CAPTURE(b);
        REQUIRE(at.size() == size_t(b == 0 ? 2 : 3));
        for (size_t k = 1; k < at.size(); ++k) CHECK(at[k] == at[k - 1] + 1);
        const auto cta_of = [&](int i) {
          return int(std::upper_bound(s.cta_begin.begin(), s.cta_begin.end(), i) - s.cta_begin.begin()) - 1;
        };
        CHECK(cta_of(at.front()) == cta_of(at.back()));
      }
    }
  }
}

namespace {

// Per-CTA sums of modelled_tile_cost, and for each (sequence, head) how far apart its tiles start
// (the largest gap between the modelled start times of its first and last tile).
struct ModelledLoad {
  double max_over_mean = 0;
  double widest_start_gap = 0;
};
ModelledLoad modelled_load(const ProblemDesc& p, const CtaSchedule& s, double half_tile_cost) {
  std::vector<double> load(size_t(s.ctas()), 0.0);
  std::map<std::pair<int, int>, std::pair<double, double>> starts;
  for (int c = 0; c < s.ctas(); ++c)
    for (int i = s.cta_begin[size_t(c)]; i < s.cta_begin[size_t(c) + 1]; ++i) {
      const WorkTile& t = s.tiles[size_t(i)];
      const auto at = starts.emplace(std::make_pair(t.batch, t.head), std::make_pair(load[size_t(c)], load[size_t(c)]));
      at.first->second.first = std::min(at.first->second.first, load[size_t(c)]);
      at.first->second.second = std::max(at.first->second.second, load[size_t(c)]);
      load[size_t(c)] += modelled_tile_cost(p, t, 128, half_tile_cost);
    }
  ModelledLoad m;
  const double mean = std::accumulate(load.begin(), load.end(), 0.0) / double(load.size());
  m.max_over_mean = *std::max_element(load.begin(), load.end()) / mean;
  for (const auto& kv : starts) m.widest_start_gap = std::max(m.widest_start_gap, kv.second.second - kv.second.first);
  return m;
}

}  // namespace

TEST_CASE("modelled tile cost: only a last tile of at most half the rows is cheaper") {
  const ProblemDesc p = with_lengths({320, 64, 65}, {512, 512, 512}, 1, 1);
  const auto tiles = build_forward_tiles(p, 128, 128, SchedulePolicy::kGridOrder, 132);
  REQUIRE(tiles.size() == 5);  // 3 + 1 + 1 tiles, each seeing 4 KV blocks
  const double want[] = {4, 4, 3, 3, 4};  // rows 128, 128, 64 | 64 | 65
  for (size_t i = 0; i < tiles.size(); ++i) CHECK(modelled_tile_cost(p, tiles[i], 128, 0.75) == doctest::Approx(want[i]));
  for (const WorkTile& t : tiles) CHECK(modelled_tile_cost(p, t, 128, 1.0) == doctest::Approx(tile_cost(t)));
}

TEST_CASE("forward schedule with cheaper half tiles: balanced by the model, siblings still start together") {
  // Uniform Lq = 320 against 512 keys: three tiles per (sequence, head), the last one half empty.
  // 132 CTAs, a multiple of 3: the snake puts every half tile on the same CTAs round after round.
  const ProblemDesc p = with_lengths(std::vector<int>(1152, 320), std::vector<int>(1152, 512));
  const CtaSchedule snake = build_forward_schedule(p, 128, 128, SchedulePolicy::kZigzag, 132, 2, 1.0);
  const CtaSchedule dealt = build_forward_schedule(p, 128, 128, SchedulePolicy::kZigzag, 132, 2, 0.75);
  CHECK(same_tiles(dealt.tiles, snake.tiles));
  CHECK(dealt.ctas() == 132);
  const ModelledLoad a = modelled_load(p, snake, 0.75), b = modelled_load(p, dealt, 0.75);
  CHECK(a.max_over_mean > 1.05);
  CHECK(b.max_over_mean < 1.01);
  CHECK(modelled_cta_load(p, snake, 128, 0.75).max_over_mean == doctest::Approx(a.max_over_mean));
  CHECK(modelled_cta_load(p, dealt, 128, 0.75).max_over_mean == doctest::Approx(b.max_over_mean));
  CHECK(modelled_cta_load(p, dealt, 128, 1.0).max_over_mean == doctest::Approx(cta_load(dealt).max_over_mean));
  // A whole tile costs 4 here: the dealt schedule starts every sibling within one tile of the first,
  // the snake lets them drift apart by many.
  CHECK(b.widest_start_gap <= 4.0);
  CHECK(a.widest_start_gap > 8.0);
  // The other policies keep their dealing whatever the model says; with equal costs the dealing by
  // load is round-robin in the sorted order (what longest-first deals).
  const ProblemDesc whole = with_lengths(std::vector<int>(330, 256), std::vector<int>(330, 512));
  for (SchedulePolicy policy : {SchedulePolicy::kGridOrder, SchedulePolicy::kLongestFirst}) {
    const CtaSchedule x = build_forward_schedule(p, 128, 128, policy, 132, 2, 1.0);
    const CtaSchedule y = build_forward_schedule(p, 128, 128, policy, 132, 2, 0.75);
    CHECK(std::equal(x.tiles.begin(), x.tiles.end(), y.tiles.begin(), y.tiles.end(),
                     [](const WorkTile& s, const WorkTile& t) { return key(s) == key(t); }));
  }
  const CtaSchedule w = build_forward_schedule(whole, 128, 128, SchedulePolicy::kZigzag, 132, 2, 0.75);
  const CtaSchedule rr = build_forward_schedule(whole, 128, 128, SchedulePolicy::kLongestFirst, 132, 2, 1.0);
  CHECK(w.cta_begin == rr.cta_begin);
  CHECK(std::equal(w.tiles.begin(), w.tiles.end(), rr.tiles.begin(), rr.tiles.end(),
                   [](const WorkTile& s, const WorkTile& t) { return key(s) == key(t); }));
  CHECK(modelled_load(whole, w, 0.75).max_over_mean == doctest::Approx(1.0));
}

TEST_CASE("query-column tiles: main and tail schedules cover every query row once, tails cut in 64-row blocks") {
  // Lq with last tiles of 1, 32, 33, 64, 65, 96, 97 and 128 rows, one sequence without keys (its
  // tile stays with the main forward, which writes its zeros), two heads.
  ProblemDesc p;
  p.heads_q = p.heads_kv = 2;
  p.head_dim = 128;
  const std::vector<int> lq = {1, 160, 33, 64, 193, 96, 97, 128, 20};
  std::vector<int> lk = {300, 512, 64, 1, 130, 700, 64, 256, 0};
  p.cu_seqlens_q = offsets_from_lengths(lq);
  p.cu_seqlens_k = offsets_from_lengths(lk);
  for (int tail_rows : {64, 96}) {
    CAPTURE(tail_rows);
    const CtaSchedule main = build_forward_schedule(p, 128, 128, SchedulePolicy::kZigzag, 3, 2, 1.0, tail_rows);
    const CtaSchedule tails = build_tail_schedule(p, 128, tail_rows, 5);
    REQUIRE(tails.cta_begin.size() == 6);
    CHECK(tails.cta_begin.back() == int(tails.tiles.size()));
    // rows[(b, h)]: how often each query row is covered.
    std::map<std::pair<int, int>, std::vector<int>> rows;
    for (size_t b = 0; b < lq.size(); ++b)
      for (int h = 0; h < 2; ++h) rows[{int(b), h}] = std::vector<int>(size_t(lq[b]), 0);
    for (const WorkTile& t : main.tiles)
      for (int r = t.block * 128; r < std::min(lq[size_t(t.batch)], t.block * 128 + 128); ++r)
        ++rows[{t.batch, t.head}][size_t(r)];
    for (const WorkTile& t : tails.tiles) {
      const int first = t.block * 64, n = std::min(64, lq[size_t(t.batch)] - first);
      REQUIRE(n > 0);
      CHECK(lk[size_t(t.batch)] > 0);                                   // only tiles that see a key
      CHECK(lq[size_t(t.batch)] - (first / 128) * 128 <= tail_rows);    // of a last tile within the limit
      for (int r = first; r < first + n; ++r) ++rows[{t.batch, t.head}][size_t(r)];
    }
    for (const auto& kv : rows)
      for (int c : kv.second) CHECK(c == 1);
    // Tails per head: the last tiles of 1, 32 (Lq 160), 33 and 64 rows; with 96 also those of 65
    // (Lq 193) and 96 rows, two 64-row blocks each. 97 and 128 rows stay whole main tiles.
    const size_t tail_blocks = tail_rows == 64 ? 4 : 4 + 2 + 2;
    CHECK(tails.tiles.size() == 2 * tail_blocks);
  }
  CHECK_THROWS_AS(build_tail_schedule(p, 128, 64, 0), ProblemError);
}

TEST_CASE("query-column tiles beside the main forward: the same blocks, each worker's in the main's time order") {
  // Eight sequences of 4 x 128 + 32 rows (a tail block each after four main tiles) and two of 40
  // rows (a tail block alone), dense keys of 512, two heads; the main forward on 3 CTAs.
  ProblemDesc p;
  p.heads_q = p.heads_kv = 2;
  p.head_dim = 128;
  std::vector<int> lq(8, 4 * 128 + 32);
  lq.push_back(40);
  lq.push_back(40);
  const std::vector<int> lk(lq.size(), 512);
  p.cu_seqlens_q = offsets_from_lengths(lq);
  p.cu_seqlens_k = offsets_from_lengths(lk);
  const CtaSchedule main = build_forward_schedule(p, 128, 128, SchedulePolicy::kZigzag, 3, 0, 1.0, 64);
  const CtaSchedule behind = build_tail_schedule(p, 128, 64, 4);
  const CtaSchedule beside = build_tail_schedule_beside(p, 128, 64, 4, main, 1.0);
  REQUIRE(beside.cta_begin.size() == 5);
  CHECK(beside.cta_begin.back() == int(beside.tiles.size()));
  // The same blocks as behind the main forward, each once.
  auto key = [](const WorkTile& t) { return std::make_tuple(t.batch, t.head, t.block, t.work); };
  std::vector<std::tuple<int, int, int, int>> a, b;
  for (const WorkTile& t : behind.tiles) a.push_back(key(t));
  for (const WorkTile& t : beside.tiles) b.push_back(key(t));
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  CHECK(a == b);
  CHECK(b.size() == 2 * 10);
  // Moments: the main tiles run in grid order, four per (sequence, head), on 3 CTAs of equal
  // tiles: (sequence 0, head 0) owns rounds 0 and 1 of 22 rounds' worth, so its moment is early;
  // the last sequence with main tiles is read at the end; the two alone are spread in (0, 1).
  for (double x : tail_block_moments(p, 128, beside.tiles, main, 1.0)) {
    CHECK(x > 0.0);
    CHECK(x < 1.0);
  }
  std::vector<WorkTile> probe = {WorkTile{0, 0, 8, 4}, WorkTile{7, 1, 8, 4}, WorkTile{8, 0, 0, 4}, WorkTile{9, 1, 0, 4}};
  const std::vector<double> pm = tail_block_moments(p, 128, probe, main, 1.0);
  CHECK(pm[0] < 0.15);
  CHECK(pm[1] > 0.85);
  CHECK(pm[2] == doctest::Approx(0.25));  // two blocks alone: at 1/4 and 3/4
  CHECK(pm[3] == doctest::Approx(0.75));
  // Each worker walks its blocks in time order (the moments of the blocks in grid order, as the
  // schedule takes them: the blocks alone are spread in that order).
  std::vector<WorkTile> grid = beside.tiles;
  std::sort(grid.begin(), grid.end(), [&](const WorkTile& x, const WorkTile& y) { return key(x) < key(y); });
  const std::vector<double> mg = tail_block_moments(p, 128, grid, main, 1.0);
  std::map<std::tuple<int, int, int, int>, double> moment_of;
  for (size_t i = 0; i < grid.size(); ++i) moment_of[key(grid[i])] = mg[i];
  for (int w = 0; w < beside.ctas(); ++w)
    for (int i = beside.cta_begin[size_t(w)] + 1; i < beside.cta_begin[size_t(w) + 1]; ++i)
      CHECK(moment_of[key(beside.tiles[size_t(i - 1)])] <= moment_of[key(beside.tiles[size_t(i)])]);
}

TEST_CASE("tile-time model with query-column tiles: tail blocks cost their columns' share of the steps") {
  // One head, Lk = 256 (two key blocks of 128). Lq = 160: a whole tile (2 steps + 0.9) and a last
  // tile of 32 rows, as a narrow tail block: 2 x 32 / 128 x 1.5 + 0.45 = 1.2 steps.
  ProblemDesc p;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 128;
  p.cu_seqlens_q = offsets_from_lengths({160});
  p.cu_seqlens_k = offsets_from_lengths({256});
  TileTimeModel m{0.9, 1.0, 64, 0.45, 1.5, 1.15};
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(160.0 * 256 / ((2.9 + 1.2) * 128 * 128)));
  // Without the tails the last tile is a whole one at half_step_share 1: 2.9 steps.
  m.tail_rows = 0;
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(160.0 * 256 / (5.8 * 128 * 128)));
  // Lq = 208 with tails up to 96 rows: the last 80 rows as a 64-row wide block (2 x 0.5 x 1.15 +
  // 0.45) and a 16-row narrow one (2 x 0.25 x 1.5 + 0.45); up to 64 rows they stay a whole tile.
  p.cu_seqlens_q = offsets_from_lengths({208});
  m.tail_rows = 96;
  CHECK(modelled_useful_rate(p, 128, 128, m) ==
        doctest::Approx(208.0 * 256 / ((2.9 + 1.15 + 0.45 + 0.75 + 0.45) * 128 * 128)));
  m.tail_rows = 64;
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(208.0 * 256 / (5.8 * 128 * 128)));
}

TEST_CASE("tile-time model, tails inside a sibling tile's CTA: only a last tile with a whole tile before it") {
  // One head, Lk = 256 (two key blocks of 128), tails at 1.5x / 1.15x and no boundary of their own,
  // half tiles at 0.7 of the steps plus the 0.9-step boundary.
  ProblemDesc p;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 128;
  p.cu_seqlens_k = offsets_from_lengths({256});
  TileTimeModel m{0.9, 0.7, 64, 0.0, 1.5, 1.15, true};
  // Lq = 160: a whole tile (2.9 steps) and a 32-row tail in its CTA: 2 x 32 / 128 x 1.5 = 0.75.
  p.cu_seqlens_q = offsets_from_lengths({160});
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(160.0 * 256 / ((2.9 + 0.75) * 128 * 128)));
  // Lq = 32: no sibling, so a half tile of the main forward: 0.7 x 2 + 0.9 = 2.3 steps; as a free
  // query-column tile (the tail kernel's model) it would cost the same 0.75.
  p.cu_seqlens_q = offsets_from_lengths({32});
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(32.0 * 256 / (2.3 * 128 * 128)));
  m.tails_need_sibling = false;
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(32.0 * 256 / (0.75 * 128 * 128)));
}

TEST_CASE("sibling tails: every query row once, pieces of at most 32 rows on distinct whole tiles of their sequence") {
  // Last tiles of 1, 32, 33 (Lq 161: one whole tile, so two pieces cannot fold: it stays a tile),
  // 64 (Lq 320: two whole tiles, two pieces), 65, 96, 128 rows; a sequence of 20 queries (no whole
  // tile: a tile of its own), one without keys (its tile writes zeros), two heads.
  ProblemDesc p;
  p.heads_q = p.heads_kv = 2;
  p.head_dim = 128;
  const std::vector<int> lq = {129, 160, 161, 320, 193, 224, 256, 20, 140};
  const std::vector<int> lk = {300, 512, 64, 130, 700, 64, 256, 90, 0};
  p.cu_seqlens_q = offsets_from_lengths(lq);
  p.cu_seqlens_k = offsets_from_lengths(lk);
  const SiblingTailSchedule s =
      build_sibling_tail_schedule(p, 128, 128, SchedulePolicy::kZigzag, 3, 0.75, 32, 0.25);
  REQUIRE(s.pieces.size() == s.main.tiles.size());
  REQUIRE(s.main.ctas() == 3);
  std::map<std::pair<int, int>, std::vector<int>> rows;
  for (size_t b = 0; b < lq.size(); ++b)
    for (int h = 0; h < 2; ++h) rows[{int(b), h}] = std::vector<int>(size_t(lq[b]), 0);
  std::map<std::pair<int, int>, int> pieces_of;
  for (size_t i = 0; i < s.main.tiles.size(); ++i) {
    const WorkTile& t = s.main.tiles[i];
    const int len = lq[size_t(t.batch)];
    for (int r = t.block * 128; r < std::min(len, t.block * 128 + 128); ++r) ++rows[{t.batch, t.head}][size_t(r)];
    const SiblingPiece& pc = s.pieces[i];
    if (pc.rows == 0) continue;
    CAPTURE(t.batch);
    CHECK(pc.rows <= 32);
    CHECK(len - t.block * 128 > 128);      // the host is a whole tile, not its sequence's last
    CHECK(pc.first >= (len - 1) / 128 * 128);  // the piece lies in the sequence's last tile
    CHECK(lk[size_t(t.batch)] > 0);
    for (int r = pc.first; r < pc.first + pc.rows; ++r) ++rows[{t.batch, t.head}][size_t(r)];
    ++pieces_of[{t.batch, t.head}];
  }
  for (const auto& kv : rows)
    for (int c : kv.second) CHECK(c == 1);
  // Pieces per head: 1 (Lq 129), 1 (160), 0 (161), 2 (320), 0 (193, 224, 256: last tiles over 64
  // rows), 0 (20: no whole tile), 0 (140: no keys).
  CHECK(pieces_of[{0, 0}] == 1);
  CHECK(pieces_of[{1, 1}] == 1);
  CHECK(pieces_of.count({2, 0}) == 0);
  CHECK(pieces_of[{3, 0}] == 2);
  CHECK(pieces_of[{3, 1}] == 2);
  CHECK(pieces_of.count({8, 0}) == 0);
  size_t total = 0;
  for (const auto& kv : pieces_of) total += size_t(kv.second);
  CHECK(total == 2 * 4);
  // A mask keeps every tile (a piece would read its host's key blocks, which a mask may cut).
  p.mask = kMaskCausal;
  const SiblingTailSchedule masked =
      build_sibling_tail_schedule(p, 128, 128, SchedulePolicy::kZigzag, 3, 0.75, 32, 0.25);
  for (const SiblingPiece& pc : masked.pieces) CHECK(pc.rows == 0);
  CHECK_THROWS_AS(build_sibling_tail_schedule(p, 128, 128, SchedulePolicy::kZigzag, 3, 0.75, 0, 0.25), ProblemError);
}

TEST_CASE("tile-time model, sibling tails in 32-row pieces: a whole tile before the tail per piece") {
  // One head, Lk = 256 (two key blocks of 128), whole tiles 2 steps + 0.9, half tiles 0.7 x 2 + 0.9.
  ProblemDesc p;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 128;
  p.cu_seqlens_k = offsets_from_lengths({256});
  TileTimeModel m{0.9, 0.7, 64, 0.0, 1.5, 1.15, true, 32};
  // Lq = 160: one piece of 32 rows on the whole tile: 2 x 32 / 128 x 1.5 = 0.75 steps.
  p.cu_seqlens_q = offsets_from_lengths({160});
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(160.0 * 256 / ((2.9 + 0.75) * 128 * 128)));
  // Lq = 192: a 64-row tail needs two pieces, one whole tile carries one: the tail stays a half tile.
  p.cu_seqlens_q = offsets_from_lengths({192});
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(192.0 * 256 / ((2.9 + 2.3) * 128 * 128)));
  // Lq = 320: two whole tiles carry the two pieces: 2 x 2 x 32 / 128 x 1.5 = 1.5 steps.
  p.cu_seqlens_q = offsets_from_lengths({320});
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(320.0 * 256 / ((5.8 + 1.5) * 128 * 128)));
  // Without pieces (the 64-column model) one whole tile carries the 64-row tail: 2 x 0.5 x 1.15.
  m.piece_rows = 0;
  p.cu_seqlens_q = offsets_from_lengths({192});
  CHECK(modelled_useful_rate(p, 128, 128, m) == doctest::Approx(192.0 * 256 / ((2.9 + 1.15) * 128 * 128)));
}
