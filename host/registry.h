// registry.h — every GDPA implementation the suite has, by name, and which one `run` uses.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernel_api.h"

namespace gdpa {

// Names accepted by make_kernel: "baseline", "unfused-cublas", "sm90", and the sm90 ablation
// variants listed by ablation_kernel_names() (e.g. "sm90-no-pingpong").
std::unique_ptr<AttentionKernel> make_kernel(const std::string& name);
std::vector<std::string> all_kernel_names();
std::vector<std::string> ablation_kernel_names();
// The fastest implementation for the arch: sm90 on Hopper, the baseline elsewhere.
std::string best_kernel_name(int arch);

}  // namespace gdpa
