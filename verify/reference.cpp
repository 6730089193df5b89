// reference.cpp — GDPA forward and backward on the CPU, in fp64 (see reference.h for the modes).
//
// Loop shape: one worker owns one (sequence, head) item and walks its query rows one at a time.
// K (and V for dP) are gathered transposed, [dim][Lk], so the logits of a row are D unit-stride
// updates over j (s[j] += q[d] * Kt[d][j]); the compiler vectorises them, and each S[i,j] is still
// the plain sum over d = 0..D-1 in order. V and K are also kept row-major, [Lk][dim], for the
// products that run over j (O += P V, dQ += dS K), which are unit-stride over d.
#include "reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
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

}  // namespace ref_detail

using namespace ref_detail;

namespace {

// s[j - lo] = sum_d x[d] * t[d][j] for j in [lo, hi), t stored [dim][len] (len = row length of t).
void dot_row_transposed(const double* x, const double* t, int dim, int len, int lo, int hi,
                        double* s) {
  const int n = hi - lo;
  std::fill(s, s + n, 0.0);
  for (int d = 0; d < dim; ++d) {
    const double xd = x[d];
    const double* td = t + int64_t(d) * len + lo;
    for (int j = 0; j < n; ++j) s[j] += xd * td[j];
  }
}

// acc[d] += w * row[d]
inline void axpy(double w, const double* row, int dim, double* acc) {
  for (int d = 0; d < dim; ++d) acc[d] += w * row[d];
}

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

// P for one allowed (i, j), from the fp64 dot product of its Q and K rows.
//   kExact: out_scale * f(logit_scale * dot), all fp64.
//   kEmulateKernel: the kernel holds S in fp32 (its MMA accumulator, then an fp32 multiply by
//   logit_scale), evaluates the fp32 activation it compiles (act_f_rt), multiplies by out_scale in
//   fp32, and rounds P to the io dtype because the PV tensor-core product reads it in that type.
//   kFastGeluBf16: the kernels pair key columns (j, j+1) in one bf16x2 instruction, but every
//   packed lane is computed independently, so the elementwise act_f_rt (which emulates the bf16
//   rounding of that mode) gives the same value as the pair form; a test holds this.
struct PointwiseForward {
  int act, dtype;
  double ls, os;
  float ls_f, os_f;
  RefMode mode;
  double p(double dot) const {
    if (mode == RefMode::kExact) return os * act_f_exact(act, ls * dot);
    const float s = float(dot) * ls_f;
    return double(round_io(dtype, os_f * act_f_rt(act, s)));
  }
};

void forward_item(const ProblemDesc& p, const float* q, const float* k, const float* v, RefMode mode,
                  double* out, const WorkItem& item, std::vector<double>& scratch) {
  const int b = item.batch, h = item.head, D = p.head_dim;
  const int hk = h / p.group();
  const int len_q = p.len_q(b), len_k = p.len_k(b);
  const int q0 = p.q_begin(b), k0 = p.k_begin(b);

  scratch.resize(size_t(len_k) * D * 2 + size_t(len_k) + 2 * size_t(D));
  double* kt = scratch.data();                       // [D][Lk]
  double* vr = kt + size_t(len_k) * D;               // [Lk][D]
  double* s = vr + size_t(len_k) * D;                // [Lk] one row of logits
  double* qrow = s + len_k;                          // [D]
  double* acc = qrow + D;                            // [D]
  gather_head(k, p.heads_kv, D, hk, k0, len_k, /*transposed=*/true, kt);
  gather_head(v, p.heads_kv, D, hk, k0, len_k, /*transposed=*/false, vr);

  const PointwiseForward pw{p.activation, p.dtype, p.logit_scale, p.out_scale,
                            p.logit_scale, p.out_scale, mode};
  for (int i = 0; i < len_q; ++i) {
    std::fill(acc, acc + D, 0.0);
    int lo, hi;
    allowed_hull(p, len_q, len_k, i, &lo, &hi);
    if (lo < hi) {
      load_row(q, q0 + i, p.heads_q, D, h, qrow);
      dot_row_transposed(qrow, kt, D, len_k, lo, hi, s);
      for (int j = lo; j < hi; ++j) {
        // Disallowed pairs contribute exactly zero (spec 2): skipped, not multiplied by 0,
        // so a non-finite V row outside the mask cannot reach this row.
        if (!mask_allowed(p.mask, i, j, len_q, len_k, p.window_left, p.window_right)) continue;
        axpy(pw.p(s[j - lo]), vr + size_t(j) * D, D, acc);
      }
    }
    store_row(acc, D, mode, p.dtype, out + (int64_t(q0) + i) * p.q_row() + int64_t(h) * D);
  }
}

void backward_item(const ProblemDesc& p, const float* q, const float* k, const float* v,
                   const float* dout, RefMode mode, double* dq, double* dk, double* dv,
                   const WorkItem& item, std::vector<double>& scratch) {
  // One item is a whole KV head of one sequence with the G query heads that read it, so dK and
  // dV are summed over the group inside one worker: no races, and a fixed summation order
  // (heads ascending, then query rows ascending) that makes results independent of threads.
  const int b = item.batch, hk = item.head, D = p.head_dim, G = p.group();
  const int len_q = p.len_q(b), len_k = p.len_k(b);
  const int q0 = p.q_begin(b), k0 = p.k_begin(b);
  const size_t kd = size_t(len_k) * D;

  scratch.resize(5 * kd + 2 * size_t(len_k) + 3 * size_t(D));
  double* kt = scratch.data();  // [D][Lk]
  double* kr = kt + kd;         // [Lk][D]
  double* vt = kr + kd;         // [D][Lk]
  double* dk_acc = vt + kd;     // [Lk][D]
  double* dv_acc = dk_acc + kd; // [Lk][D]
  double* s = dv_acc + kd;      // [Lk]
  double* dp = s + len_k;       // [Lk]
  double* qrow = dp + len_k;    // [D]
  double* dorow = qrow + D;     // [D]
  double* dq_acc = dorow + D;   // [D]
  gather_head(k, p.heads_kv, D, hk, k0, len_k, true, kt);
  gather_head(k, p.heads_kv, D, hk, k0, len_k, false, kr);
  gather_head(v, p.heads_kv, D, hk, k0, len_k, true, vt);
  std::fill(dk_acc, dk_acc + 2 * kd, 0.0);

  const int act = p.activation, dtype = p.dtype;
  const double ls = p.logit_scale, os = p.out_scale;
  // The kernels fold both scales into one fp32 constant before the epilogue of dS.
  const float ls_f = p.logit_scale, os_f = p.out_scale, scale_f = ls_f * os_f;

  for (int h = hk * G; h < (hk + 1) * G; ++h) {
    for (int i = 0; i < len_q; ++i) {
      std::fill(dq_acc, dq_acc + D, 0.0);
      int lo, hi;
      allowed_hull(p, len_q, len_k, i, &lo, &hi);
      if (lo < hi) {
        load_row(q, q0 + i, p.heads_q, D, h, qrow);
        load_row(dout, q0 + i, p.heads_q, D, h, dorow);
        dot_row_transposed(qrow, kt, D, len_k, lo, hi, s);
        dot_row_transposed(dorow, vt, D, len_k, lo, hi, dp);
        for (int j = lo; j < hi; ++j) {
          if (!mask_allowed(p.mask, i, j, len_q, len_k, p.window_left, p.window_right)) continue;
          double pj, dsj;
          if (mode == RefMode::kExact) {
            const double sj = ls * s[j - lo];
            pj = os * act_f_exact(act, sj);
            dsj = ls * os * act_df_exact(act, sj) * dp[j - lo];
          } else {
            // Emulation: S and dP are fp32 MMA results; P (for dV) and dS (for dQ and dK) are
            // rounded to the io dtype because they are tensor-core operands; dS is formed in fp32
            // as (logit_scale * out_scale) * f'(S) * dP, the kernels' order.
            const float sj = float(s[j - lo]) * ls_f;
            const float dpj = float(dp[j - lo]);
            pj = double(round_io(dtype, os_f * act_f_rt(act, sj)));
            dsj = double(round_io(dtype, scale_f * act_df_rt(act, sj) * dpj));
          }
          axpy(dsj, kr + size_t(j) * D, D, dq_acc);
          axpy(dsj, qrow, D, dk_acc + size_t(j) * D);
          axpy(pj, dorow, D, dv_acc + size_t(j) * D);
        }
      }
      store_row(dq_acc, D, mode, dtype, dq + (int64_t(q0) + i) * p.q_row() + int64_t(h) * D);
    }
  }
  for (int j = 0; j < len_k; ++j) {
    const int64_t off = (int64_t(k0) + j) * p.k_row() + int64_t(hk) * D;
    store_row(dk_acc + size_t(j) * D, D, mode, dtype, dk + off);
    store_row(dv_acc + size_t(j) * D, D, mode, dtype, dv + off);
  }
}

// Cost of an item for ordering: the pairs it visits plus the rows it writes.
double item_cost(const ProblemDesc& p, int b) {
  return double(p.len_q(b)) * p.len_k(b) + p.len_q(b) + p.len_k(b);
}

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
  std::vector<std::vector<double>> scratch(size_t(std::max(workers, 1)));
  run_longest_first(items, workers, [&](const WorkItem& it, int w) {
    forward_item(p, q, k, v, mode, out, it, scratch[size_t(w)]);
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
  std::vector<std::vector<double>> scratch(size_t(std::max(workers, 1)));
  run_longest_first(items, workers, [&](const WorkItem& it, int w) {
    backward_item(p, q, k, v, dout, mode, dq, dk, dv, it, scratch[size_t(w)]);
  });
}

}  // namespace gdpa
