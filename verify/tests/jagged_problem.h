// jagged_problem.h — the tests' jagged batch: `batch` sequences with lengths drawn at sparsity 0.5
// up to `max_len` (self attention, Lk = Lq) from `seed`, and the given heads; the rest of the
// problem at ProblemDesc's defaults, for each test to set what it exercises.
#pragma once
#include <cstdint>

#include "../../host/generator.h"

namespace gdpa {

inline ProblemDesc jagged_problem(int batch, int max_len, uint64_t seed, int heads_q, int heads_kv) {
  BatchShape shape;
  shape.batch = batch;
  shape.max_len_q = max_len;
  shape.sparsity = 0.5;
  ProblemDesc p = make_problem(shape, seed);
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  return p;
}

}  // namespace gdpa
