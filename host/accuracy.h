// accuracy.h — how far each activation, as the GPU evaluates it, is from the fp64 definitions:
// the accuracy half of the activation ablation (issue: report time and accuracy side by side).
#pragma once
#include <string>
#include <vector>

#include "driver.h"

namespace gdpa {

// Largest |error| of f and f' over |x| <= bound, for one reference function.
struct ErrorBand {
  double bound = 0;
  double max_abs_f = 0, max_abs_df = 0;
  double worst_x_f = 0, worst_x_df = 0;
};

struct ActivationAccuracy {
  int activation = 0;
  std::string name;
  // Against the activation's own definition (fast_gelu: tanh GELU; gelu_poly: its polynomial).
  std::vector<ErrorBand> own;
  // GELU family only (empty otherwise): against erf GELU, the function all of them stand in for,
  // and against tanh GELU, which fast_gelu is defined as (the mixed mode's FMA part stands in for it).
  std::vector<ErrorBand> vs_gelu, vs_gelu_tanh;
};

// The bands reported: |x| <= 1 (where the Taylor form is meant to hold), 4 and 8 (attention logits
// of the benchmark are about N(0, 1), so 8 is far out).
std::vector<double> accuracy_bounds();

// Evaluates `activation` on the GPU on a grid of 2^-10 steps over [-8, 8] and compares.
ActivationAccuracy measure_activation_accuracy(int activation, int arch, CUstream stream);

}  // namespace gdpa
