#include "sass_tools.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

#include "../../host/compile.h"

namespace gdpa {

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

}  // namespace

// Through verify/tools/cuobjdump.sh, the lookup that `make sass` and experiments/register_probe.sh
// use too. Empty when this machine has no cuobjdump (the script then exits 127 with nothing on
// stdout), and the SASS tests fail with a message: make test installs it.
std::string disassemble(const std::vector<char>& cubin) {
  char path[] = "/tmp/gdpa_sass_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "";
  close(fd);
  std::ofstream(path, std::ios::binary).write(cubin.data(), std::streamsize(cubin.size()));
  const std::string sass = run("'" + source_root() + "/verify/tools/cuobjdump.sh' -sass " + path + " 2>/dev/null");
  std::remove(path);
  return sass;
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size())) ++n;
  return n;
}

}  // namespace gdpa
