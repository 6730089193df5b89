// reference.h — the CPU reference of GDPA (spec sections 2 and 4): the definition of correct.
//
// Two modes, because a kernel can only be judged against what its own number formats allow:
//   kExact          everything in fp64 with the exact activation (act_f_exact / act_df_exact);
//                   nothing is rounded. This is the truth every error is measured against.
//   kEmulateKernel  the rounding the kernels cannot avoid, and nothing else: S is an fp32 value,
//                   the activation is the fp32 form the kernel runs, P and dS are rounded to the
//                   io dtype before their products (the tensor cores consume them that way), and
//                   every output is rounded to the io dtype once at the end. Sums stay in fp64, so
//                   this mode's error against kExact is the error floor of an ideal kernel; the
//                   comparison rule (compare.h) lets a kernel be a small factor above it.
//
// Inputs are float arrays holding values representable in p.dtype (converted from the io bits),
// laid out as the packed jagged tensors of the spec: q and dout [total_q, heads_q, head_dim],
// k and v [total_k, heads_kv, head_dim]. Outputs are the caller's arrays of the same shapes.
// Any head_dim >= 1 is accepted (the kernels' 64/128 restriction is validate()'s business, and
// tiny dims make hand-checked tests possible).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "../host/problem.h"

namespace gdpa {

// kEmulateUnfused: kEmulateKernel plus the extra rounding of the
// unfused path (host/unfused_cublas.h): S and dP leave their GEMMs in the io dtype before the
// elementwise kernel reads them, as torch.bmm gives them to a PyTorch user.
enum class RefMode { kExact, kEmulateKernel, kEmulateUnfused };

// O for the query sequences in *only_batches (all when null); rows of other sequences are left
// untouched. Query sequence b reads KV sequence p.kv_seq(b). threads = 0: hardware_concurrency.
// The result is bit-identical for every thread count.
void reference_forward(const ProblemDesc& p, const float* q, const float* k, const float* v,
                       RefMode mode, double* out, const std::vector<int>* only_batches = nullptr,
                       int threads = 0);

// dQ, dK, dV of loss = sum(O * dout). With only_batches, the dq rows of those sequences and the
// dk/dv rows of their KV sequences are written (kv_index must be empty: the spec keeps it
// forward-only, so query sequence b owns KV sequence b). Throws std::invalid_argument otherwise.
void reference_backward(const ProblemDesc& p, const float* q, const float* k, const float* v,
                        const float* dout, RefMode mode, double* dq, double* dk, double* dv,
                        const std::vector<int>* only_batches = nullptr, int threads = 0);

// Pieces shared with the other CPU references (softmax_reference.cpp); not for kernel code.
namespace ref_detail {

// One independent piece of work: a (sequence, head) pair and its cost for longest-first ordering.
struct WorkItem {
  int batch;
  int head;
  double cost;
};

// Runs fn(item, worker) for every item on min(threads, items) std::threads, longest first.
// Each item must write disjoint outputs; `worker` in [0, workers) indexes per-thread scratch.
// Returns the number of workers used (so callers can size scratch before: see worker_count).
int worker_count(int threads, size_t items);
void run_longest_first(std::vector<WorkItem> items, int workers,
                       const std::function<void(const WorkItem&, int worker)>& fn);

// Throws std::invalid_argument when the shape description cannot be walked safely
// (offsets, heads, head_dim, kv_index). Deliberately not validate(): see the file comment.
void check_shape(const ProblemDesc& p);

// The sorted, de-duplicated batch list to compute (every batch when only is null).
std::vector<int> selected_batches(const ProblemDesc& p, const std::vector<int>* only);

// Copies rows [row_begin, row_begin + len) of one head of a packed [rows, heads, dim] tensor into
// fp64. Row-major gives dst[j * dim + d]; transposed gives dst[d * len + j], the layout that makes
// "one query row against all keys" a unit-stride update over j.
void gather_head(const float* src, int heads, int dim, int head, int row_begin, int len,
                 bool transposed, double* dst);

// s[j - lo] = sum_d x[d] * t[d * len + j] for j in [lo, hi), summed over d in ascending order.
// t is a transposed head ([dim][len]), so the work is unit-stride over j and vectorises.
void dot_transposed(const double* x, const double* t, int dim, int len, int lo, int hi, double* s);

// acc[d] += w[0] * rows[0][d], then w[1] * rows[1][d], ... in that order: the same value as n
// successive axpys, with acc read and written once per group of rows instead of once per row.
void accumulate_rows(const double* w, const double* const* rows, int n, int dim, double* acc);

// [*first, *last_excl): the smallest key interval containing every j with mask_allowed(i, j).
// Found with mask_allowed itself, so the reference never trusts the range helpers the kernels
// use to skip tiles (a bug there must show up as a mismatch, not be copied).
void allowed_hull(const ProblemDesc& p, int len_q, int len_k, int i, int* first, int* last_excl);

}  // namespace ref_detail
}  // namespace gdpa
