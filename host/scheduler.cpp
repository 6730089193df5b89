// scheduler.cpp — see scheduler.h for the tile-list contract.
#include "scheduler.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <string>
#include <tuple>

#include "../kernels/common/masks.cuh"
#include "../kernels/sm90/fwd_tail_config.h"

namespace gdpa {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

void check_args(int block_m, int block_n, int num_sms) {
  if (block_m <= 0 || block_n <= 0)
    throw ProblemError("tile sizes must be positive (block_m " + std::to_string(block_m) + ", block_n " +
                       std::to_string(block_n) + ")");
  if (num_sms <= 0) throw ProblemError("num_sms must be positive (got " + std::to_string(num_sms) + ")");
}

// Number of `block`-aligned tiles of [0, len) that intersect [lo, hi) after clamping to [0, len).
int tiles_touched(int lo, int hi, int len, int block) {
  lo = std::max(lo, 0);
  hi = std::min(hi, len);
  return hi > lo ? ceil_div(hi, block) - lo / block : 0;
}

void sort_longest_first(std::vector<WorkTile>& tiles) {
  std::stable_sort(tiles.begin(), tiles.end(),
                   [](const WorkTile& a, const WorkTile& b) { return tile_cost(a) > tile_cost(b); });
}

// Deals a longest-first list to `workers` in snake order; see scheduler.h.
std::vector<WorkTile> deal_zigzag(const std::vector<WorkTile>& sorted, int workers) {
  const size_t n = sorted.size(), w = size_t(workers);
  std::vector<WorkTile> out(n);
  std::vector<long long> load(w, 0);
  const size_t full_rounds = n / w;
  for (size_t r = 0; r < full_rounds; ++r) {
    const size_t base = r * w;
    for (size_t i = 0; i < w; ++i) {
      const size_t worker = (r % 2 == 0) ? i : w - 1 - i;
      out[base + worker] = sorted[base + i];
      load[worker] += tile_cost(sorted[base + i]);
    }
  }
  // Partial last round: only workers 0..k-1 exist for it; largest tile to the least loaded.
  const size_t base = full_rounds * w, k = n - base;
  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return load[a] < load[b]; });
  for (size_t i = 0; i < k; ++i) out[base + order[i]] = sorted[base + i];
  return out;
}

}  // namespace

std::vector<WorkTile> apply_policy(std::vector<WorkTile> tiles, SchedulePolicy policy, int num_sms) {
  switch (policy) {
    case SchedulePolicy::kGridOrder:
      return tiles;
    case SchedulePolicy::kLongestFirst:
      sort_longest_first(tiles);
      return tiles;
    case SchedulePolicy::kZigzag:
      sort_longest_first(tiles);
      return deal_zigzag(tiles, num_sms);
  }
  throw ProblemError("unknown schedule policy " + std::to_string(int(policy)));
}

const char* schedule_policy_name(SchedulePolicy p) {
  switch (p) {
    case SchedulePolicy::kGridOrder: return "grid";
    case SchedulePolicy::kLongestFirst: return "longest-first";
    case SchedulePolicy::kZigzag: return "zigzag";
  }
  return "?";
}

SchedulePolicy parse_schedule_policy(const std::string& name) {
  for (SchedulePolicy p : {SchedulePolicy::kGridOrder, SchedulePolicy::kLongestFirst, SchedulePolicy::kZigzag})
    if (name == schedule_policy_name(p)) return p;
  throw ProblemError("unknown schedule policy '" + name + "' (grid, longest-first, zigzag)");
}

std::vector<WorkTile> build_forward_tiles(const ProblemDesc& p, int block_m, int block_n,
                                          SchedulePolicy policy, int num_sms) {
  check_args(block_m, block_n, num_sms);
  size_t count = 0;
  for (int b = 0; b < p.batch(); ++b) count += size_t(ceil_div(p.len_q(b), block_m)) * size_t(p.heads_q);
  std::vector<WorkTile> tiles;
  tiles.reserve(count);
  std::vector<int> work_of_block;
  for (int b = 0; b < p.batch(); ++b) {
    const int lq = p.len_q(b), lk = p.len_k(b);
    const int blocks = ceil_div(lq, block_m);  // 0 for Lq = 0: nothing to write, no tile
    work_of_block.resize(size_t(blocks));
    for (int m = 0; m < blocks; ++m) {
      int lo = 0, hi = 0;
      mask_key_range(p.mask, m * block_m, std::min(lq, (m + 1) * block_m), lq, lk, p.window_left,
                     p.window_right, &lo, &hi);
      work_of_block[size_t(m)] = tiles_touched(lo, hi, lk, block_n);
    }
    for (int h = 0; h < p.heads_q; ++h)
      for (int m = 0; m < blocks; ++m) tiles.push_back(WorkTile{b, h, m, work_of_block[size_t(m)]});
  }
  return apply_policy(std::move(tiles), policy, num_sms);
}

std::vector<WorkTile> build_backward_tiles(const ProblemDesc& p, int block_m, int block_n,
                                           SchedulePolicy policy, int num_sms) {
  check_args(block_m, block_n, num_sms);
  if (!p.kv_index.empty()) throw ProblemError("kv_index is forward-only: no backward tiles for shared KV");
  const int group = p.group();
  size_t count = 0;
  for (int b = 0; b < p.batch(); ++b) count += size_t(ceil_div(p.len_k(b), block_n)) * size_t(p.heads_kv);
  std::vector<WorkTile> tiles;
  tiles.reserve(count);
  std::vector<int> work_of_block;
  for (int b = 0; b < p.batch(); ++b) {
    const int lq = p.len_q(b), lk = p.len_k(b);
    const int blocks = ceil_div(lk, block_n);
    work_of_block.resize(size_t(blocks));
    for (int n = 0; n < blocks; ++n) {
      int lo = 0, hi = 0;
      mask_query_range(p.mask, n * block_n, std::min(lk, (n + 1) * block_n), lq, lk, p.window_left,
                       p.window_right, &lo, &hi);
      work_of_block[size_t(n)] = tiles_touched(lo, hi, lq, block_m) * group;
    }
    for (int h = 0; h < p.heads_kv; ++h)
      for (int n = 0; n < blocks; ++n) tiles.push_back(WorkTile{b, h, n, work_of_block[size_t(n)]});
  }
  return apply_policy(std::move(tiles), policy, num_sms);
}

LoadStats per_sm_load(const std::vector<WorkTile>& tiles, int num_sms) {
  if (num_sms <= 0) throw ProblemError("num_sms must be positive (got " + std::to_string(num_sms) + ")");
  std::vector<double> load(size_t(num_sms), 0.0);
  for (size_t i = 0; i < tiles.size(); ++i) load[i % size_t(num_sms)] += tile_cost(tiles[i]);
  LoadStats s;
  s.max_work = *std::max_element(load.begin(), load.end());
  s.mean_work = std::accumulate(load.begin(), load.end(), 0.0) / num_sms;
  s.max_over_mean = s.mean_work > 0 ? s.max_work / s.mean_work : 1.0;
  return s;
}

namespace {

// The query rows forward tile t holds (block_m, or fewer in a sequence's last tile), and whether
// they are at most half of it: the tiles the sm90 forward's empty-half skip runs on one warpgroup.
int rows_of(const ProblemDesc& p, const WorkTile& t, int block_m) {
  return std::min(block_m, p.len_q(t.batch) - t.block * block_m);
}
bool half_empty(const ProblemDesc& p, const WorkTile& t, int block_m) { return rows_of(p, t, block_m) <= block_m / 2; }

// Items in the order given, each to the worker with the least load so far (ties to the lowest
// worker, so equal costs deal round-robin): the indices each worker gets, in order.
std::vector<std::vector<size_t>> deal_by_load(const std::vector<double>& cost, int workers) {
  using Load = std::pair<double, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> free_at;
  for (int w = 0; w < workers; ++w) free_at.push({0.0, w});
  std::vector<std::vector<size_t>> per_worker(static_cast<size_t>(workers));
  for (size_t i = 0; i < cost.size(); ++i) {
    const Load l = free_at.top();
    free_at.pop();
    per_worker[size_t(l.second)].push_back(i);
    free_at.push({l.first + cost[i], l.second});
  }
  return per_worker;
}

// The 64-row blocks build_tail_schedule cuts tail tile t into: fn(first row of the block inside
// the tile, its columns: sm90::tail_cols of the rows left, 32 or 64).
template <class Fn>
void for_each_tail_block(const ProblemDesc& p, const WorkTile& t, int block_m, Fn fn) {
  const int rows = rows_of(p, t, block_m);
  for (int first = 0; first < rows; first += sm90::kTailMaxRows) fn(first, sm90::tail_cols(rows - first));
}

}  // namespace

double modelled_tile_cost(const ProblemDesc& p, const WorkTile& t, int block_m, double half_tile_cost) {
  return tile_cost(t) * (half_empty(p, t, block_m) ? half_tile_cost : 1.0);
}

bool is_tail_tile(const ProblemDesc& p, const WorkTile& t, int block_m, int tail_rows) {
  return t.work > 0 && rows_of(p, t, block_m) <= tail_rows;
}

namespace {

// The 64-row blocks of the tiles is_tail_tile names, in grid order, with the cost the tail
// schedules deal by: 64-key blocks times the block's columns over 64, plus one block for the
// boundary.
struct TailBlocks {
  std::vector<WorkTile> tiles;
  std::vector<double> cost;
};

TailBlocks tail_blocks(const ProblemDesc& p, int block_m, int tail_rows) {
  constexpr int kRows = sm90::kTailMaxRows;
  if (block_m % kRows != 0) throw ProblemError("tail schedule: block_m must be a multiple of 64");
  TailBlocks b;
  for (const WorkTile& t : build_forward_tiles(p, block_m, kRows, SchedulePolicy::kGridOrder, 1)) {
    if (!is_tail_tile(p, t, block_m, tail_rows)) continue;
    for_each_tail_block(p, t, block_m, [&](int first, int cols) {
      WorkTile w = t;
      w.block = t.block * (block_m / kRows) + first / kRows;
      b.tiles.push_back(w);
      b.cost.push_back(t.work * double(cols) / kRows + 1.0);
    });
  }
  return b;
}

// The blocks taken in `order`, each to the least loaded worker.
CtaSchedule deal_tail_blocks(const TailBlocks& b, const std::vector<size_t>& order, int workers) {
  if (workers <= 0) throw ProblemError("tail schedule: workers must be positive (got " + std::to_string(workers) + ")");
  std::vector<double> ordered_cost(order.size());
  for (size_t k = 0; k < order.size(); ++k) ordered_cost[k] = b.cost[order[k]];
  CtaSchedule s;
  s.cta_begin.push_back(0);
  for (const auto& list : deal_by_load(ordered_cost, workers)) {
    for (size_t k : list) s.tiles.push_back(b.tiles[order[k]]);
    s.cta_begin.push_back(int(s.tiles.size()));
  }
  return s;
}

}  // namespace

CtaSchedule build_tail_schedule(const ProblemDesc& p, int block_m, int tail_rows, int workers) {
  const TailBlocks b = tail_blocks(p, block_m, tail_rows);
  std::vector<size_t> order(b.tiles.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return b.cost[x] > b.cost[y]; });
  return deal_tail_blocks(b, order, workers);
}

std::vector<double> tail_block_moments(const ProblemDesc& p, int block_m, const std::vector<WorkTile>& blocks,
                                       const CtaSchedule& main, double half_tile_cost) {
  // Each main tile's modelled midpoint on its CTA, summed per (sequence, head); their mean over
  // the busiest CTA's modelled time below.
  std::map<std::pair<int, int>, std::pair<double, int>> mid;  // (batch, head) -> (sum, count)
  double makespan = 0.0;
  for (int c = 0; c < main.ctas(); ++c) {
    double clock = 0.0;
    for (int i = main.cta_begin[size_t(c)]; i < main.cta_begin[size_t(c) + 1]; ++i) {
      const WorkTile& t = main.tiles[size_t(i)];
      const double cost = modelled_tile_cost(p, t, block_m, half_tile_cost);
      auto& m = mid[{t.batch, t.head}];
      m.first += clock + 0.5 * cost;
      ++m.second;
      clock += cost;
    }
    makespan = std::max(makespan, clock);
  }
  // Blocks of a (sequence, head) with no main tile: spread evenly over the run, in grid order.
  size_t alone = 0;
  for (const WorkTile& t : blocks) alone += mid.count({t.batch, t.head}) ? 0 : 1;
  std::vector<double> moment(blocks.size());
  size_t k = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto it = mid.find({blocks[i].batch, blocks[i].head});
    moment[i] = it != mid.end() ? it->second.first / (it->second.second * makespan)
                                : (double(k++) + 0.5) / double(alone);
  }
  return moment;
}

CtaSchedule build_tail_schedule_beside(const ProblemDesc& p, int block_m, int tail_rows, int workers,
                                       const CtaSchedule& main, double half_tile_cost) {
  const TailBlocks b = tail_blocks(p, block_m, tail_rows);
  const std::vector<double> moment = tail_block_moments(p, block_m, b.tiles, main, half_tile_cost);
  std::vector<size_t> order(b.tiles.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return moment[x] < moment[y]; });
  return deal_tail_blocks(b, order, workers);
}

namespace {

// The forward's dealing (build_forward_schedule's, scheduler.h) of grid-ordered `tiles`;
// extra_cost, empty or one entry per tile, is added to each tile's modelled cost, and given, it
// deals by load as a half_tile_cost below 1 does.
CtaSchedule deal_forward_tiles(const ProblemDesc& p, const std::vector<WorkTile>& tiles, int block_m, int block_n,
                               SchedulePolicy policy, int num_sms, int resident_blocks, double half_tile_cost,
                               const std::vector<double>& extra_cost = {}) {
  struct Unit {
    size_t first, count;
    long long cost;
  };
  std::vector<Unit> units;
  for (size_t i = 0; i < tiles.size();) {
    size_t j = i + 1;
    const bool resident = resident_blocks > 0 && tiles[i].work > 0 && tiles[i].work <= resident_blocks;
    // Only tiles that visit exactly the same KV blocks can share them; with no mask every query
    // tile of a sequence does, under a mask the ranges differ and the group splits.
    while (resident && j < tiles.size() && tiles[j].batch == tiles[i].batch && tiles[j].head == tiles[i].head &&
           tiles[j].work == tiles[i].work && (p.mask == kMaskNone || p.len_k(tiles[i].batch) <= block_n))
      ++j;
    // Every run counts, down to two tiles. A run holds the K/V ring until it ends and so delays
    // the next prefetch, which once made pairs not worth grouping; but at L = 256 the forward is
    // bound by L2 traffic (ncu: 82-88 % busy), and loading a pair's K/V once measured 1.02-1.08x
    // there, neutral on the longer sets (experiments/PERF_NOTES.md).
    long long cost = 0;
    for (size_t k = i; k < j; ++k) cost += tile_cost(tiles[k]);
    units.push_back(Unit{i, j - i, cost});
    i = j;
  }
  if (policy != SchedulePolicy::kGridOrder)
    std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.cost > b.cost; });
  const int ctas = int(std::min<size_t>(units.size(), size_t(num_sms)));
  std::vector<std::vector<size_t>> per_cta(static_cast<size_t>(ctas));
  if (policy == SchedulePolicy::kZigzag && (half_tile_cost != 1.0 || !extra_cost.empty()) && ctas > 0) {
    // Least modelled load first, ties to the lowest CTA: with equal costs this deals round-robin.
    std::vector<double> cost(units.size(), 0.0);
    for (size_t u = 0; u < units.size(); ++u)
      for (size_t k = units[u].first; k < units[u].first + units[u].count; ++k)
        cost[u] += modelled_tile_cost(p, tiles[k], block_m, half_tile_cost) +
                   (extra_cost.empty() ? 0.0 : extra_cost[k]);
    per_cta = deal_by_load(cost, ctas);
  } else {
    for (size_t u = 0; u < units.size(); ++u) {
      const size_t round = u / size_t(ctas), pos = u % size_t(ctas);
      const size_t cta = (policy == SchedulePolicy::kZigzag && round % 2 == 1) ? size_t(ctas) - 1 - pos : pos;
      per_cta[cta].push_back(u);
    }
  }
  CtaSchedule s;
  s.tiles.reserve(tiles.size());
  s.cta_begin.push_back(0);
  for (const auto& list : per_cta) {
    for (size_t u : list)
      for (size_t k = 0; k < units[u].count; ++k) s.tiles.push_back(tiles[units[u].first + k]);
    s.cta_begin.push_back(int(s.tiles.size()));
  }
  return s;
}

}  // namespace

CtaSchedule build_forward_schedule(const ProblemDesc& p, int block_m, int block_n, SchedulePolicy policy,
                                   int num_sms, int resident_blocks, double half_tile_cost, int tail_rows) {
  // Grid-ordered tiles: (batch, head, block) nested, so the tiles of one (sequence, head) are
  // adjacent and in increasing block order.
  std::vector<WorkTile> tiles = build_forward_tiles(p, block_m, block_n, SchedulePolicy::kGridOrder, num_sms);
  if (tail_rows > 0)
    tiles.erase(std::remove_if(tiles.begin(), tiles.end(),
                               [&](const WorkTile& t) { return is_tail_tile(p, t, block_m, tail_rows); }),
                tiles.end());
  return deal_forward_tiles(p, tiles, block_m, block_n, policy, num_sms, resident_blocks, half_tile_cost);
}

SiblingTailSchedule build_sibling_tail_schedule(const ProblemDesc& p, int block_m, int block_n, SchedulePolicy policy,
                                                int num_sms, double half_tile_cost, int piece_rows,
                                                double piece_cost) {
  if (piece_rows <= 0) throw ProblemError("sibling tails: piece_rows must be positive");
  // Grid order: the tiles of a (sequence, head) adjacent, in increasing block order.
  const std::vector<WorkTile> grid = build_forward_tiles(p, block_m, block_n, SchedulePolicy::kGridOrder, num_sms);
  std::vector<WorkTile> kept;
  kept.reserve(grid.size());
  std::map<std::tuple<int, int, int>, SiblingPiece> piece_of;  // (batch, head, block) of a host tile
  for (size_t i = 0; i < grid.size();) {
    size_t j = i + 1;
    while (j < grid.size() && grid[j].batch == grid[i].batch && grid[j].head == grid[i].head) ++j;
    const WorkTile& last = grid[j - 1];
    const int rows = rows_of(p, last, block_m);
    const int pieces = (rows + piece_rows - 1) / piece_rows;
    // Hosts: the whole tiles before the last, the later ones first, each with the last's keys
    // (a piece reads its host's key blocks; with no mask every tile of a sequence has them all).
    std::vector<size_t> hosts;
    for (size_t k = j - 1; k-- > i && int(hosts.size()) < pieces;)
      if (grid[k].work == last.work) hosts.push_back(k);
    const bool fold = p.mask == kMaskNone && last.work > 0 && half_empty(p, last, block_m) &&
                      int(hosts.size()) == pieces;
    for (size_t k = i; k < j; ++k)
      if (!(fold && k == j - 1)) kept.push_back(grid[k]);
    if (fold)
      for (int q = 0; q < pieces; ++q) {
        const int first = last.block * block_m + q * piece_rows;
        const WorkTile& h = grid[hosts[size_t(q)]];
        piece_of[{h.batch, h.head, h.block}] = SiblingPiece{first, std::min(piece_rows, p.len_q(h.batch) - first)};
      }
    i = j;
  }
  auto piece = [&](const WorkTile& t) {
    const auto it = piece_of.find({t.batch, t.head, t.block});
    return it == piece_of.end() ? SiblingPiece{} : it->second;
  };
  std::vector<double> extra;  // a host tile's pieces add to its cost
  if (!piece_of.empty())
    for (const WorkTile& t : kept) extra.push_back(piece(t).rows > 0 ? piece_cost * tile_cost(t) : 0.0);
  SiblingTailSchedule s;
  s.main = deal_forward_tiles(p, kept, block_m, block_n, policy, num_sms, 0, half_tile_cost, extra);
  s.pieces.reserve(s.main.tiles.size());
  for (const WorkTile& t : s.main.tiles) s.pieces.push_back(piece(t));
  return s;
}

namespace {

template <class Cost>
LoadStats cta_load_by(const CtaSchedule& s, Cost cost) {
  LoadStats st;
  const int n = s.ctas();
  if (n == 0) return st;
  std::vector<double> load(size_t(n), 0.0);
  for (int c = 0; c < n; ++c)
    for (int i = s.cta_begin[size_t(c)]; i < s.cta_begin[size_t(c) + 1]; ++i) load[size_t(c)] += cost(s.tiles[size_t(i)]);
  st.max_work = *std::max_element(load.begin(), load.end());
  st.mean_work = std::accumulate(load.begin(), load.end(), 0.0) / n;
  st.max_over_mean = st.mean_work > 0 ? st.max_work / st.mean_work : 1.0;
  return st;
}

}  // namespace

LoadStats cta_load(const CtaSchedule& s) {
  return cta_load_by(s, [](const WorkTile& t) { return double(tile_cost(t)); });
}

LoadStats modelled_cta_load(const ProblemDesc& p, const CtaSchedule& s, int block_m, double half_tile_cost) {
  return cta_load_by(s, [&](const WorkTile& t) { return modelled_tile_cost(p, t, block_m, half_tile_cost); });
}

double modelled_useful_rate(const ProblemDesc& p, int block_m, int block_n, const TileTimeModel& m) {
  double useful = 0, steps = 0;
  for (const WorkTile& t : build_forward_tiles(p, block_m, block_n, SchedulePolicy::kGridOrder, 1)) {
    const int rows = rows_of(p, t, block_m);
    useful += double(rows) * p.len_k(t.batch);
    const int pieces = m.piece_rows > 0 ? (rows + m.piece_rows - 1) / m.piece_rows : 0;
    if (m.tails_need_sibling && pieces > 0) {
      if (m.tail_rows > 0 && is_tail_tile(p, t, block_m, m.tail_rows) && t.block >= pieces) {
        steps += t.work * double(pieces * m.piece_rows) / block_m * m.narrow_slowdown;
        continue;
      }
    } else if (m.tail_rows > 0 && is_tail_tile(p, t, block_m, m.tail_rows) && (!m.tails_need_sibling || t.block > 0)) {
      for_each_tail_block(p, t, block_m, [&](int, int cols) {
        const double slowdown = cols == sm90::kTailNarrowRows ? m.narrow_slowdown : m.wide_slowdown;
        steps += t.work * double(cols) / block_m * slowdown + m.tail_boundary_steps;
      });
      continue;
    }
    steps += (half_empty(p, t, block_m) ? m.half_step_share : 1.0) * t.work + m.boundary_steps;
  }
  return steps > 0 ? useful / (steps * block_m * block_n) : 0.0;
}

double modelled_parity(const ProblemDesc& half, double limit_half, const ProblemDesc& dense, double limit_dense,
                       int block_m, int block_n, const TileTimeModel& m) {
  const double rate_dense = modelled_useful_rate(dense, block_m, block_n, m);
  if (rate_dense <= 0 || limit_half <= 0 || limit_dense <= 0) return 0.0;
  return (modelled_useful_rate(half, block_m, block_n, m) / limit_half) / (rate_dense / limit_dense);
}

double largest_boundary_reaching(double target, const ProblemDesc& half, double limit_half, const ProblemDesc& dense,
                                 double limit_dense, int block_m, int block_n, double half_step_share,
                                 double max_boundary) {
  auto parity = [&](double b) {
    return modelled_parity(half, limit_half, dense, limit_dense, block_m, block_n, {b, half_step_share});
  };
  if (parity(0.0) < target) return -1.0;
  if (parity(max_boundary) >= target) return max_boundary;
  double lo = 0.0, hi = max_boundary;  // parity(lo) >= target > parity(hi)
  for (int i = 0; i < 40; ++i) {
    const double mid = 0.5 * (lo + hi);
    (parity(mid) >= target ? lo : hi) = mid;
  }
  return lo;
}

double tile_padding_efficiency(const ProblemDesc& p, int block_m, int block_n) {
  auto round_up = [](long long x, long long b) { return (x + b - 1) / b * b; };
  double useful = 0, computed = 0;
  for (int b = 0; b < p.batch(); ++b) {
    const long long lq = p.len_q(b), lk = p.len_k(b);
    useful += double(lq * lk);
    computed += double(round_up(lq, block_m) * round_up(lk, block_n));
  }
  return computed > 0 ? useful / computed : 1.0;
}

}  // namespace gdpa
