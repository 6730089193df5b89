#include "python_tools.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../../host/compile.h"

namespace gdpa {

std::string run_experiment_script(const std::string& script, const std::string& args) {
  if (std::system("python3 -c pass > /dev/null 2>&1") != 0) return "";
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "gdpa-experiment-script-test.txt";
  const std::string cmd =
      "python3 '" + source_root() + "/experiments/" + script + "' " + args + " > '" + out.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  std::filesystem::remove(out);
  return rc == 0 ? text.str() : script + " failed:\n" + text.str();
}

}  // namespace gdpa
