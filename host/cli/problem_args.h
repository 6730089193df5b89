// problem_args.h — the problem options shared by `run`, `bench` and `schedule`.
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include "../problem.h"
#include "args.h"

namespace gdpa::cli {

// Options: --batch --heads --kv-heads --dim --len --len-k --sparsity --act --dtype --mask
// --window LEFT,RIGHT --logit-scale --out-scale --seed, or explicit --offsets-q / --offsets-k
// ("0,17,40") and --kv-index ("1,0").
extern const std::set<std::string> kProblemOptions;
extern const char* kProblemHelp;

struct ProblemDefaults {
  int batch = 1152, heads = 4, dim = 128, len = 1024, len_k = 0;
  double sparsity = 0.5;
};

ProblemDesc problem_from_args(const Args& a, const ProblemDefaults& d);
// The activation a command-line name stands for (the names of kernels/common/activations.cuh);
// otherwise ProblemError "unknown activation 'NAME'" followed by HINT, the one message every command
// gives for a name it does not know.
Activation activation_named(const std::string& name, const std::string& hint = "");
uint64_t seed_from_args(const Args& a);

}  // namespace gdpa::cli
