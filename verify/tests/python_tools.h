// python_tools.h — running one of experiments/'s tools (Python, or a shell command) in a test and
// reading what it printed.
#pragma once
#include <string>

namespace gdpa {

// What a shell command printed (stdout and stderr) and its exit status.
struct CommandResult {
  int status = 0;  // std::system's return: 0 for success
  std::string output;
};
CommandResult run_command(const std::string& cmd);

// `python3 experiments/<script> <args>` (args quoted as the shell needs them): its printout (stdout
// and stderr), "" where python3 is missing, or "<script> failed:" and the printout on a non-zero exit.
std::string run_experiment_script(const std::string& script, const std::string& args);

}  // namespace gdpa
