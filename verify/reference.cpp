// reference.cpp — GDPA forward and backward on the CPU, in fp64 (see reference.h for the modes).
//
// Loop shape: one worker owns one item and walks its query rows. K (and V, for dP) are gathered
// transposed, [dim][Lk], so the logits of a row are unit-stride updates over j that the compiler
// vectorises, while each S[i, j] stays the plain sum over d = 0..D-1 in order. V and K are also
// kept row-major, [Lk][dim], for the products that run over j (O += P V, dQ += dS K), and the
// backward hands dK/dV rows the contributions of four query rows per pass. Every blocking keeps
// each output's summation order fixed (d, j or (head, row) ascending), so results do not depend
// on blocking or threads. Built without FMA contraction (plain -O2 on x86-64), the emulation
// tests can re-derive the emulated outputs bit for bit.
#include "reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

#include "../kernels/common/activations.cuh"
#include "../kernels/common/dtype.cuh"
#include "../kernels/common/masks.cuh"

namespace gdpa {
namespace ref_detail {

int worker_count(int threads, size_t items) {
  size_t n = threads > 0 ? size_t(threads) : size_t(std::thread::hardware_concurrency());
  if (n == 0) n = 1;
  if (n > items) n = items;
  return int(n);
}

void run_longest_first(std::vector<WorkItem> items, int workers,
                       const std::function<void(const WorkItem&, int worker)>& fn) {
  // Longest first so the last item to start is a short one and the workers finish together.
  // Ties keep (batch, head) order; the order never changes results (items are independent).
  std::stable_sort(items.begin(), items.end(),
                   [](const WorkItem& a, const WorkItem& b) { return a.cost > b.cost; });
  if (workers <= 1) {
    for (const WorkItem& it : items) fn(it, 0);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (size_t i = next++; i < items.size() && !failed; i = next++) {
        try {
          fn(items[i], w);
        } catch (...) {
          if (!failed.exchange(true)) error = std::current_exception();
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

static void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("gdpa reference: " + what);
}

static void check_offsets(const std::vector<int>& cu, const char* name) {
  require(!cu.empty() && cu[0] == 0, std::string(name) + " must start at 0");
  for (size_t b = 1; b < cu.size(); ++b)
    require(cu[b] >= cu[b - 1], std::string(name) + " must be non-decreasing");
}

void check_shape(const ProblemDesc& p) {
  require(p.heads_q > 0 && p.heads_kv > 0, "heads must be positive");
  require(p.heads_q % p.heads_kv == 0, "heads_q must be a multiple of heads_kv");
  require(p.head_dim >= 1, "head_dim must be >= 1");
  require(p.activation >= 0 && p.activation < kNumActivations, "activation out of range");
  require(p.mask >= 0 && p.mask < kNumMaskKinds, "mask out of range");
  require(p.dtype >= 0 && p.dtype < kNumDTypes, "dtype out of range");
  check_offsets(p.cu_seqlens_q, "cu_seqlens_q");
  check_offsets(p.cu_seqlens_k, "cu_seqlens_k");
  const int kv_batches = int(p.cu_seqlens_k.size()) - 1;
  if (p.kv_index.empty()) {
    require(kv_batches == p.batch(), "cu_seqlens_k must have as many sequences as cu_seqlens_q");
  } else {
    require(int(p.kv_index.size()) == p.batch(), "kv_index needs one entry per query sequence");
    for (int s : p.kv_index) require(s >= 0 && s < kv_batches, "kv_index entry out of range");
  }
}

std::vector<int> selected_batches(const ProblemDesc& p, const std::vector<int>* only) {
  std::vector<int> out;
  if (!only) {
    for (int b = 0; b < p.batch(); ++b) out.push_back(b);
    return out;
  }
  out = *only;
  for (int b : out) require(b >= 0 && b < p.batch(), "only_batches entry out of range");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void gather_head(const float* src, int heads, int dim, int head, int row_begin, int len,
                 bool transposed, double* dst) {
  const int64_t stride = int64_t(heads) * dim;
  for (int j = 0; j < len; ++j) {
    const float* row = src + (int64_t(row_begin) + j) * stride + int64_t(head) * dim;
    if (transposed) {
      for (int d = 0; d < dim; ++d) dst[int64_t(d) * len + j] = row[d];
    } else {
      for (int d = 0; d < dim; ++d) dst[int64_t(j) * dim + d] = row[d];
    }
  }
}

void allowed_hull(const ProblemDesc& p, int len_q, int len_k, int i, int* first, int* last_excl) {
  auto ok = [&](int j) {
    return mask_allowed(p.mask, i, j, len_q, len_k, p.window_left, p.window_right);
  };
  int lo = 0;
  while (lo < len_k && !ok(lo)) ++lo;
  int hi = len_k;
  while (hi > lo && !ok(hi - 1)) --hi;
  *first = lo;
  *last_excl = hi;
}

// Two doubles in one SSE2 / NEON register. g++ -O2 does not vectorise loops whose trip count is
// unknown (its "very cheap" cost model), so the hot loops say it themselves. Each lane performs
// exactly the scalar multiply and add, so results equal the plain loops bit for bit.
typedef double Vec2 __attribute__((vector_size(16)));

static inline Vec2 load2(const double* p) {
  Vec2 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
static inline void store2(double* p, Vec2 v) { std::memcpy(p, &v, sizeof v); }
static inline Vec2 splat2(double x) { return Vec2{x, x}; }

namespace {

// acc[j] += c[0] p[0][j], then + c[1] p[1][j], + c[2] p[2][j], + c[3] p[3][j], for j < n: four
// rows folded into acc per pass (acc is loaded and stored a quarter as often), each element still
// summed in the order of the plain loop, so the result is bit-identical to it.
inline void add_four_rows(double* acc, int n, const double (&c)[4], const double* const (&p)[4]) {
  const Vec2 v0 = splat2(c[0]), v1 = splat2(c[1]), v2 = splat2(c[2]), v3 = splat2(c[3]);
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    Vec2 a = load2(acc + j), b = load2(acc + j + 2);
    a += v0 * load2(p[0] + j);
    b += v0 * load2(p[0] + j + 2);
    a += v1 * load2(p[1] + j);
    b += v1 * load2(p[1] + j + 2);
    a += v2 * load2(p[2] + j);
    b += v2 * load2(p[2] + j + 2);
    a += v3 * load2(p[3] + j);
    b += v3 * load2(p[3] + j + 2);
    store2(acc + j, a);
    store2(acc + j + 2, b);
  }
  for (; j < n; ++j) {
    double a = acc[j];
    a += c[0] * p[0][j];
    a += c[1] * p[1][j];
    a += c[2] * p[2][j];
    a += c[3] * p[3][j];
    acc[j] = a;
  }
}

}  // namespace

void dot_transposed(const double* x, const double* t, int dim, int len, int lo, int hi,
                    double* s) {
  const int n = hi - lo;
  std::fill(s, s + n, 0.0);
  int d = 0;
  // Four d steps per pass over s, each still added in order d, d+1, d+2, d+3.
  for (; d + 4 <= dim; d += 4) {
    const double* t0 = t + int64_t(d) * len + lo;
    add_four_rows(s, n, {x[d], x[d + 1], x[d + 2], x[d + 3]}, {t0, t0 + len, t0 + 2 * len, t0 + 3 * len});
  }
  for (; d < dim; ++d) {
    const double xd = x[d];
    const double* td = t + int64_t(d) * len + lo;
    for (int j = 0; j < n; ++j) s[j] += xd * td[j];
  }
}

void accumulate_rows(const double* w, const double* const* rows, int n, int dim, double* acc) {
  int r = 0;
  for (; r + 4 <= n; r += 4)
    add_four_rows(acc, dim, {w[r], w[r + 1], w[r + 2], w[r + 3]}, {rows[r], rows[r + 1], rows[r + 2], rows[r + 3]});
  for (; r < n; ++r) {
    const double wr = w[r];
    const double* rr = rows[r];
    for (int d = 0; d < dim; ++d) acc[d] += wr * rr[d];
  }
}

}  // namespace ref_detail

using namespace ref_detail;

namespace {

void load_row(const float* src, int64_t row, int heads, int dim, int head, double* dst) {
  const float* r = src + row * heads * dim + int64_t(head) * dim;
  for (int d = 0; d < dim; ++d) dst[d] = r[d];
}

// In kEmulateKernel mode every output passes through the io dtype once, after an fp32 cast:
// the kernels accumulate in fp32 and store with one cvt.rn (spec 2, "one final cast").
void store_row(const double* acc, int dim, RefMode mode, int dtype, double* dst) {
  for (int d = 0; d < dim; ++d)
    dst[d] = mode == RefMode::kExact ? acc[d] : double(round_io(dtype, float(acc[d])));
}

// The pointwise step of one allowed (i, j): P (and for the backward dS) from the fp64 dot products
// S_dot = Q_i . K_j and dP_dot = dO_i . V_j.
//   kExact: P = out_scale f(logit_scale S_dot), dS = logit_scale out_scale f'(.) dP_dot, in fp64.
//   kEmulateKernel: the kernel holds S and dP as fp32 MMA results (S then multiplied by logit_scale
//   in fp32), runs the fp32 activation it compiles (act_f_rt / act_df_rt), multiplies by out_scale
//   in fp32, and rounds P and dS to the io dtype because the next tensor-core products read them
//   in that type. dS is formed as (logit_scale * out_scale) * f'(S) * dP, both scales folded into
//   one fp32 constant first (the natural kernel form; another order moves dS by an fp32 ulp, far
//   below its io rounding).
//   kFastGeluBf16: the kernels evaluate key columns (j, j+1), j even, in one bf16x2 instruction;
//   each packed lane is computed independently, so the elementwise act_f_rt (which runs the same
//   emulated bf16 steps on one lane) gives the pair form's value (a test holds this).
struct Pointwise {
  int act, dtype;
  RefMode mode;
  double ls, os;
  float ls_f, os_f, scale_f;
  Pointwise(const ProblemDesc& p, RefMode m)
      : act(p.activation), dtype(p.dtype), mode(m), ls(p.logit_scale), os(p.out_scale),
        ls_f(p.logit_scale), os_f(p.out_scale), scale_f(p.logit_scale * p.out_scale) {}

  // S as the kernel's activation reads it: fp32, or the io dtype for the unfused path.
  float s_of(double s_dot) const {
    const float s = float(s_dot) * ls_f;
    return mode == RefMode::kEmulateUnfused ? round_io(dtype, s) : s;
  }
  double p(double s_dot) const {
    if (mode == RefMode::kExact) return os * act_f_exact(act, ls * s_dot);
    return double(round_io(dtype, os_f * act_f_rt(act, s_of(s_dot))));
  }
  double ds(double s_dot, double dp_dot) const {
    if (mode == RefMode::kExact) return ls * os * act_df_exact(act, ls * s_dot) * dp_dot;
    const float dp = mode == RefMode::kEmulateUnfused ? round_io(dtype, float(dp_dot)) : float(dp_dot);
    return double(round_io(dtype, scale_f * act_df_rt(act, s_of(s_dot)) * dp));
  }
};

bool allowed(const ProblemDesc& p, int i, int j, int len_q, int len_k) {
  return mask_allowed(p.mask, i, j, len_q, len_k, p.window_left, p.window_right);
}

void forward_item(const ProblemDesc& p, const float* q, const float* k, const float* v, RefMode mode,
                  double* out, const WorkItem& item, std::vector<double>& scratch,
                  std::vector<const double*>& rows) {
  const int b = item.batch, h = item.head, D = p.head_dim;
  const int hk = h / p.group();
  const int len_q = p.len_q(b), len_k = p.len_k(b);
  const int q0 = p.q_begin(b), k0 = p.k_begin(b);
  const size_t kd = size_t(len_k) * D;

  scratch.resize(2 * kd + 2 * size_t(len_k) + 2 * size_t(D));
  double* kt = scratch.data();  // [D][Lk]
  double* vr = kt + kd;         // [Lk][D]
  double* s = vr + kd;          // [Lk] one row of logits
  double* w = s + len_k;        // [Lk] P of the allowed keys of that row
  double* qrow = w + len_k;     // [D]
  double* acc = qrow + D;       // [D]
  rows.resize(size_t(len_k));
  gather_head(k, p.heads_kv, D, hk, k0, len_k, /*transposed=*/true, kt);
  gather_head(v, p.heads_kv, D, hk, k0, len_k, /*transposed=*/false, vr);

  const Pointwise pw(p, mode);
  for (int i = 0; i < len_q; ++i) {
    std::fill(acc, acc + D, 0.0);
    int lo, hi;
    allowed_hull(p, len_q, len_k, i, &lo, &hi);
    if (lo < hi) {
      load_row(q, q0 + i, p.heads_q, D, h, qrow);
      dot_transposed(qrow, kt, D, len_k, lo, hi, s);
      int n = 0;
      for (int j = lo; j < hi; ++j) {
        // A disallowed pair contributes exactly zero (spec 2): it is skipped, not multiplied by
        // 0, so a non-finite V row the mask hides cannot reach this row.
        if (!allowed(p, i, j, len_q, len_k)) continue;
        w[n] = pw.p(s[j - lo]);
        rows[size_t(n++)] = vr + size_t(j) * D;
      }
      accumulate_rows(w, rows.data(), n, D, acc);
    }
    store_row(acc, D, mode, p.dtype, out + (int64_t(q0) + i) * p.q_row() + int64_t(h) * D);
  }
}

// Query rows per backward step: dK and dV rows receive the contributions of this many query rows
// in one pass (in ascending row order), so the [Lk][D] accumulators stream through the cache a
// quarter as often.
constexpr int kRowBlock = 4;

void backward_item(const ProblemDesc& p, const float* q, const float* k, const float* v,
                   const float* dout, RefMode mode, double* dq, double* dk, double* dv,
                   const WorkItem& item, std::vector<double>& scratch,
                   std::vector<const double*>& rows) {
  // One item is a whole KV head of one sequence with the G query heads that read it, so dK and
  // dV are summed over the group inside one worker: no races, and a fixed summation order
  // (heads ascending, then query rows ascending) that makes results independent of threads.
  const int b = item.batch, hk = item.head, D = p.head_dim, G = p.group();
  const int len_q = p.len_q(b), len_k = p.len_k(b);
  const int q0 = p.q_begin(b), k0 = p.k_begin(b);
  const size_t kd = size_t(len_k) * D, R = kRowBlock;

  const size_t nw = std::max(size_t(len_k), 2 * R);
  scratch.resize(5 * kd + 2 * R * size_t(len_k) + nw + 3 * R * size_t(D));
  double* kt = scratch.data();        // [D][Lk]
  double* kr = kt + kd;               // [Lk][D]
  double* vt = kr + kd;               // [D][Lk]
  double* dk_acc = vt + kd;           // [Lk][D]
  double* dv_acc = dk_acc + kd;       // [Lk][D]
  double* s = dv_acc + kd;            // [R][Lk] logits, then dS, of the block's rows
  double* dp = s + R * len_k;         // [R][Lk] dP, then P
  double* wbuf = dp + R * len_k;      // [nw] weights for accumulate_rows
  double* qrows = wbuf + nw;          // [R][D]
  double* dorows = qrows + R * D;     // [R][D]
  double* dq_acc = dorows + R * D;    // [R][D]
  rows.resize(nw);
  gather_head(k, p.heads_kv, D, hk, k0, len_k, true, kt);
  gather_head(k, p.heads_kv, D, hk, k0, len_k, false, kr);
  gather_head(v, p.heads_kv, D, hk, k0, len_k, true, vt);
  std::fill(dk_acc, dk_acc + 2 * kd, 0.0);

  const Pointwise pw(p, mode);
  for (int h = hk * G; h < (hk + 1) * G; ++h) {
    for (int i0 = 0; i0 < len_q; i0 += kRowBlock) {
      const int nr = std::min(kRowBlock, len_q - i0);
      int lo[kRowBlock], hi[kRowBlock];
      int union_lo = len_k, union_hi = 0;
      for (int r = 0; r < nr; ++r) {
        const int i = i0 + r;
        double* sr = s + size_t(r) * len_k;  // indexed by j directly within [lo, hi)
        double* dpr = dp + size_t(r) * len_k;
        double* dqr = dq_acc + size_t(r) * D;
        std::fill(dqr, dqr + D, 0.0);
        allowed_hull(p, len_q, len_k, i, &lo[r], &hi[r]);
        if (lo[r] >= hi[r]) continue;
        union_lo = std::min(union_lo, lo[r]);
        union_hi = std::max(union_hi, hi[r]);
        load_row(q, q0 + i, p.heads_q, D, h, qrows + size_t(r) * D);
        load_row(dout, q0 + i, p.heads_q, D, h, dorows + size_t(r) * D);
        dot_transposed(qrows + size_t(r) * D, kt, D, len_k, lo[r], hi[r], sr + lo[r]);
        dot_transposed(dorows + size_t(r) * D, vt, D, len_k, lo[r], hi[r], dpr + lo[r]);
        // Overwrite the dots in place: sr[j] becomes dS, dpr[j] becomes P.
        int n = 0;
        for (int j = lo[r]; j < hi[r]; ++j) {
          if (!allowed(p, i, j, len_q, len_k)) continue;
          const double pj = pw.p(sr[j]), dsj = pw.ds(sr[j], dpr[j]);
          sr[j] = dsj;
          dpr[j] = pj;
          wbuf[n] = dsj;
          rows[size_t(n++)] = kr + size_t(j) * D;
        }
        accumulate_rows(wbuf, rows.data(), n, D, dqr);  // dQ_i = sum_j dS K_j, j ascending
      }
      // dK_j += sum_r dS[r, j] Q_r and dV_j += sum_r P[r, j] dO_r, rows in ascending order.
      for (int j = union_lo; j < union_hi; ++j) {
        int n = 0;
        double* wk = wbuf;
        double* wv = wbuf + R;
        const double** rk = rows.data();
        const double** rv = rows.data() + R;
        for (int r = 0; r < nr; ++r) {
          if (j < lo[r] || j >= hi[r] || !allowed(p, i0 + r, j, len_q, len_k)) continue;
          wk[n] = s[size_t(r) * len_k + j];
          wv[n] = dp[size_t(r) * len_k + j];
          rk[n] = qrows + size_t(r) * D;
          rv[n] = dorows + size_t(r) * D;
          ++n;
        }
        accumulate_rows(wk, rk, n, D, dk_acc + size_t(j) * D);
        accumulate_rows(wv, rv, n, D, dv_acc + size_t(j) * D);
      }
      for (int r = 0; r < nr; ++r)
        store_row(dq_acc + size_t(r) * D, D, mode, p.dtype,
                  dq + (int64_t(q0) + i0 + r) * p.q_row() + int64_t(h) * D);
    }
  }
  for (int j = 0; j < len_k; ++j) {
    const int64_t off = (int64_t(k0) + j) * p.k_row() + int64_t(hk) * D;
    store_row(dk_acc + size_t(j) * D, D, mode, p.dtype, dk + off);
    store_row(dv_acc + size_t(j) * D, D, mode, p.dtype, dv + off);
  }
}

// Cost of an item for ordering: the pairs it visits plus the rows it writes.
double item_cost(const ProblemDesc& p, int b) {
  return double(p.len_q(b)) * p.len_k(b) + p.len_q(b) + p.len_k(b);
}

// Per-worker scratch, reused across that worker's items.
struct Scratch {
  std::vector<double> values;
  std::vector<const double*> rows;
};

}  // namespace

void reference_forward(const ProblemDesc& p, const float* q, const float* k, const float* v,
                       RefMode mode, double* out, const std::vector<int>* only_batches,
                       int threads) {
  check_shape(p);
  std::vector<WorkItem> items;
  for (int b : selected_batches(p, only_batches)) {
    if (p.len_q(b) == 0) continue;  // Lq = 0 gives nothing
    for (int h = 0; h < p.heads_q; ++h) items.push_back({b, h, item_cost(p, b)});
  }
  const int workers = worker_count(threads, items.size());
  std::vector<Scratch> scratch(size_t(std::max(workers, 1)));
  run_longest_first(items, workers, [&](const WorkItem& it, int w) {
    Scratch& sc = scratch[size_t(w)];
    forward_item(p, q, k, v, mode, out, it, sc.values, sc.rows);
  });
}

void reference_backward(const ProblemDesc& p, const float* q, const float* k, const float* v,
                        const float* dout, RefMode mode, double* dq, double* dk, double* dv,
                        const std::vector<int>* only_batches, int threads) {
  check_shape(p);
  if (!p.kv_index.empty())
    throw std::invalid_argument("gdpa reference: kv_index is forward-only (spec 4)");
  std::vector<WorkItem> items;
  for (int b : selected_batches(p, only_batches)) {
    // Even with Lq = 0 the item runs: it writes the zero dK/dV rows of its KV sequence.
    for (int hk = 0; hk < p.heads_kv; ++hk)
      items.push_back({b, hk, item_cost(p, b) * p.group()});
  }
  const int workers = worker_count(threads, items.size());
  std::vector<Scratch> scratch(size_t(std::max(workers, 1)));
  run_longest_first(items, workers, [&](const WorkItem& it, int w) {
    Scratch& sc = scratch[size_t(w)];
    backward_item(p, q, k, v, dout, mode, dq, dk, dv, it, sc.values, sc.rows);
  });
}

}  // namespace gdpa
