// commands.h — the subcommands of the `gdpa` CLI, one file each under host/cli/.
#pragma once

namespace gdpa::cli {

// Each takes the arguments after the subcommand name and returns the process exit code.
int cmd_info(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_check(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_kernels(int argc, char** argv);
int cmd_precompile(int argc, char** argv);
int cmd_schedule(int argc, char** argv);
int cmd_accuracy(int argc, char** argv);

}  // namespace gdpa::cli
