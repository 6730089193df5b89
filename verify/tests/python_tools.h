// python_tools.h — running one of experiments/'s Python tools in a test and reading what it printed.
#pragma once
#include <string>

namespace gdpa {

// `python3 experiments/<script> <args>` (args quoted as the shell needs them): its printout (stdout
// and stderr), "" where python3 is missing, or "<script> failed:" and the printout on a non-zero exit.
std::string run_experiment_script(const std::string& script, const std::string& args);

}  // namespace gdpa
