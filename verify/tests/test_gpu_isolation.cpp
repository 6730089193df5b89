// A NaN or an infinity in one sequence's inputs must reach only the outputs that sequence's
// attention touches (spec 2: non-finite inputs propagate to the rows they touch). On the GPU the
// hazard is the padding of edge tiles: a tile that runs past its sequence's end reads rows it
// then masks, and a masked score times a non-finite operand is still NaN (0 * Inf and 0 * NaN are
// NaN in the tensor cores too). Those rows are the next sequence's, or whatever an earlier tile
// left in the shared-memory slot. So: run the kernels on clean inputs and again with non-finite
// values planted in a few "victim" sequences, and require every output row of every other
// sequence to keep its bits.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "../../host/device_problem.h"
#include "../../host/driver.h"
#include "../../host/generator.h"
#include "../../host/registry.h"
#include "jagged_problem.h"

using namespace gdpa;

namespace {

constexpr uint16_t kNanBits = 0x7FC0;  // quiet NaN in bf16 (and in fp16: exponent all ones)
constexpr uint16_t kInfBits = 0x7F80;  // +Inf in bf16

bool is_victim(int b) { return b % 5 == 2; }

// Plants NaN / Inf in `x` ([rows, heads, d] io-dtype bits) in the rows of sequence [begin, end) of
// every victim: its first row, rows 64 and 100 (in the second half of a 128-row tile, where a
// later tile's partial load may leave them in shared memory) and its last row.
void plant(std::vector<uint16_t>& x, const std::vector<int>& offsets, int heads, int d, uint16_t bits) {
  for (int b = 0; b + 1 < int(offsets.size()); ++b) {
    if (!is_victim(b)) continue;
    const int begin = offsets[b], len = offsets[b + 1] - begin;
    if (len == 0) continue;
    std::set<int> rows = {0, len - 1};
    for (int r : {64, 100})
      if (r < len) rows.insert(r);
    for (int r : rows)
      for (int h = 0; h < heads; ++h) x[(size_t(begin + r) * heads + h) * d + (r * 7 + h * 13) % d] = bits;
  }
}

// The first row of `a` and `b` ([rows, heads, d]) in sequences that are not victims where they differ.
int first_bad_row(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const std::vector<int>& offsets,
                  int heads, int d) {
  REQUIRE(a.size() == b.size());
  for (int s = 0; s + 1 < int(offsets.size()); ++s) {
    if (is_victim(s)) continue;
    for (int r = offsets[s]; r < offsets[s + 1]; ++r)
      for (size_t i = size_t(r) * heads * d; i < size_t(r + 1) * heads * d; ++i)
        if (a[i] != b[i]) return r;
  }
  return -1;
}

// Whether some output row of a victim holds a NaN / Inf (the planted values did reach the kernel).
bool victims_show_nonfinite(const std::vector<uint16_t>& x, const std::vector<int>& offsets, int heads, int d) {
  for (int s = 0; s + 1 < int(offsets.size()); ++s) {
    if (!is_victim(s)) continue;
    for (size_t i = size_t(offsets[s]) * heads * d; i < size_t(offsets[s + 1]) * heads * d; ++i)
      if ((x[i] & 0x7F80) == 0x7F80) return true;
  }
  return false;
}

ProblemDesc isolation_problem(MaskKind mask, int head_dim) {
  ProblemDesc p = jagged_problem(60, 330, 4242, 4, 2);  // sequences of 1..330 rows: edge tiles of every fill
  p.head_dim = head_dim;
  p.mask = mask;
  return p;
}

// Runs kernel `name` forward and backward on the clean inputs and on the planted ones; every output
// row of a sequence that is not a victim must keep its bits.
void check_isolation(const Context& ctx, const std::string& name) {
  auto k = make_kernel(name);
  for (MaskKind mask : {kMaskNone, kMaskCausal}) {
    for (int d : {64, 128}) {
      const ProblemDesc p = isolation_problem(mask, d);
      std::string why;
      if (!k->supports(p, ctx.info().arch(), true, &why)) {
        MESSAGE(std::string(name + " is not run here: " + why));
        return;
      }
      const HostInputs clean = make_inputs(p, 4343, true);
      HostInputs bad = clean;
      plant(bad.q, p.cu_seqlens_q, p.heads_q, d, kNanBits);
      plant(bad.k, p.cu_seqlens_k, p.heads_kv, d, kInfBits);
      plant(bad.v, p.cu_seqlens_k, p.heads_kv, d, kNanBits);
      plant(bad.dout, p.cu_seqlens_q, p.heads_q, d, kInfBits);
      CAPTURE(name);
      CAPTURE(int(mask));
      CAPTURE(d);
      std::vector<uint16_t> out[2], dq[2], dk[2], dv[2];
      std::string stage;
      CAPTURE(stage);
      for (int run = 0; run < 2; ++run) {
        const std::string inputs = run == 0 ? "clean" : "planted";
        DeviceProblem dp(p, run == 0 ? clean : bad, true);
        Stream s;
        stage = "forward, " + inputs + " inputs";
        k->prepare(p, ctx.info(), false);
        dp.poison_outputs(s.get());
        k->forward(dp.view(), s.get());
        s.synchronize();
        dp.download_out(out[run]);
        stage = "backward, " + inputs + " inputs";
        k->prepare(p, ctx.info(), true);
        dp.poison_outputs(s.get());
        k->backward(dp.view(), s.get());
        s.synchronize();
        dp.download_grads(dq[run], dk[run], dv[run]);
      }
      CHECK(victims_show_nonfinite(out[1], p.cu_seqlens_q, p.heads_q, d));
      CHECK(first_bad_row(out[0], out[1], p.cu_seqlens_q, p.heads_q, d) == -1);
      CHECK(first_bad_row(dq[0], dq[1], p.cu_seqlens_q, p.heads_q, d) == -1);
      CHECK(first_bad_row(dk[0], dk[1], p.cu_seqlens_k, p.heads_kv, d) == -1);
      CHECK(first_bad_row(dv[0], dv[1], p.cu_seqlens_k, p.heads_kv, d) == -1);
    }
  }
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("sm90: a NaN or Inf in one sequence's inputs changes no output of another sequence") {
    Context ctx(0);
    if (ctx.info().arch() != 90) {
      MESSAGE("not an sm_90 GPU: the sm90 kernels are not run here");
      return;
    }
    check_isolation(ctx, "sm90");
  }

  TEST_CASE("baseline and unfused cuBLAS: a NaN or Inf in one sequence's inputs changes no output of another") {
    Context ctx(0);
    check_isolation(ctx, "baseline");
    check_isolation(ctx, "unfused-cublas");
  }
}
