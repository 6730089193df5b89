#include "python_tools.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../../host/compile.h"

namespace gdpa {

CommandResult run_command(const std::string& cmd) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "gdpa-experiment-script-test.txt";
  CommandResult r;
  r.status = std::system((cmd + " > '" + out.string() + "' 2>&1").c_str());
  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  r.output = text.str();
  std::filesystem::remove(out);
  return r;
}

std::string run_experiment_script(const std::string& script, const std::string& args) {
  if (std::system("python3 -c pass > /dev/null 2>&1") != 0) return "";
  const CommandResult r = run_command("python3 '" + source_root() + "/experiments/" + script + "' " + args);
  return r.status == 0 ? r.output : script + " failed:\n" + r.output;
}

}  // namespace gdpa
