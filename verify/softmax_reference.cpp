// softmax_reference.cpp — softmax attention forward on the CPU (see softmax_reference.h).
#include "softmax_reference.h"

#include <algorithm>
#include <cmath>

#include "../kernels/common/dtype.cuh"
#include "../kernels/common/masks.cuh"

namespace gdpa {

using namespace ref_detail;

namespace {

void softmax_item(const ProblemDesc& p, const float* q, const float* k, const float* v,
                  RefMode mode, double* out, const WorkItem& item, std::vector<double>& scratch,
                  std::vector<const double*>& rows) {
  const int b = item.batch, h = item.head, D = p.head_dim;
  const int hk = h / p.group();
  const int len_q = p.len_q(b), len_k = p.len_k(b);
  const int q0 = p.q_begin(b), k0 = p.k_begin(b);

  scratch.resize(size_t(len_k) * D * 2 + 2 * size_t(len_k) + 2 * size_t(D));
  double* kt = scratch.data();          // [D][Lk]
  double* vr = kt + size_t(len_k) * D;  // [Lk][D]
  double* s = vr + size_t(len_k) * D;   // [Lk] logits of one row
  double* w = s + len_k;                // [Lk] weights of one row
  double* qrow = w + len_k;             // [D]
  double* acc = qrow + D;               // [D]
  rows.resize(size_t(len_k));
  gather_head(k, p.heads_kv, D, hk, k0, len_k, true, kt);
  gather_head(v, p.heads_kv, D, hk, k0, len_k, false, vr);

  const bool exact = mode == RefMode::kExact;
  const double ls = p.logit_scale;
  const float ls_f = p.logit_scale;
  for (int i = 0; i < len_q; ++i) {
    double* orow = out + (int64_t(q0) + i) * p.q_row() + int64_t(h) * D;
    std::fill(acc, acc + D, 0.0);
    int lo, hi;
    allowed_hull(p, len_q, len_k, i, &lo, &hi);
    auto allowed = [&](int j) {
      return mask_allowed(p.mask, i, j, len_q, len_k, p.window_left, p.window_right);
    };
    bool any = false;
    if (lo < hi) {
      for (int d = 0; d < D; ++d) qrow[d] = q[(int64_t(q0) + i) * p.q_row() + int64_t(h) * D + d];
      dot_transposed(qrow, kt, D, len_k, lo, hi, s);
      // Row max over the allowed logits. A NaN logit never wins the comparison, but it still
      // reaches exp() below and poisons the row, as the spec wants for non-finite inputs.
      double m = -INFINITY;
      for (int j = lo; j < hi; ++j) {
        if (!allowed(j)) continue;
        any = true;
        const double x = exact ? ls * s[j - lo] : double(float(s[j - lo]) * ls_f);
        s[j - lo] = x;
        if (x > m) m = x;
      }
      double l = 0;
      int n = 0;
      for (int j = lo; j < hi; ++j) {
        if (!allowed(j)) continue;
        double pj;
        if (exact) {
          pj = std::exp(s[j - lo] - m);
          l += pj;
        } else {
          const float pf = std::exp(float(s[j - lo]) - float(m));
          l += pf;
          pj = double(round_io(p.dtype, pf));
        }
        w[n] = pj;
        rows[size_t(n++)] = vr + size_t(j) * D;
      }
      accumulate_rows(w, rows.data(), n, D, acc);
      if (any) {
        if (exact) {
          for (int d = 0; d < D; ++d) acc[d] /= l;
        } else {
          const float inv = 1.0f / float(l);
          for (int d = 0; d < D; ++d) acc[d] = double(round_io(p.dtype, float(acc[d]) * inv));
        }
      }
    }
    for (int d = 0; d < D; ++d) orow[d] = acc[d];
  }
}

}  // namespace

void reference_softmax_forward(const ProblemDesc& p, const float* q, const float* k,
                               const float* v, RefMode mode, double* out,
                               const std::vector<int>* only_batches, int threads) {
  check_shape(p);
  std::vector<WorkItem> items;
  for (int b : selected_batches(p, only_batches)) {
    if (p.len_q(b) == 0) continue;
    const double cost = double(p.len_q(b)) * p.len_k(b) + p.len_q(b) + p.len_k(b);
    for (int h = 0; h < p.heads_q; ++h) items.push_back({b, h, cost});
  }
  const int workers = worker_count(threads, items.size());
  std::vector<std::vector<double>> values(size_t(std::max(workers, 1)));
  std::vector<std::vector<const double*>> rows(values.size());
  run_longest_first(items, workers, [&](const WorkItem& it, int w) {
    softmax_item(p, q, k, v, mode, out, it, values[size_t(w)], rows[size_t(w)]);
  });
}

}  // namespace gdpa
