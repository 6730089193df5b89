#include "sass_tools.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

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

// PATH first, then the toolkit, then the PyPI package (nvidia/cu13/bin, with nvdisasm beside it).
std::string find_cuobjdump() {
  if (!run("command -v cuobjdump 2>/dev/null").empty()) return "cuobjdump";
  for (const char* p : {"/usr/local/cuda/bin/cuobjdump"})
    if (access(p, X_OK) == 0) return p;
  std::string dir = run("python3 -c 'import nvidia,os;print(os.path.join(nvidia.__path__[0],\"cu13\",\"bin\"))' 2>/dev/null");
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == ' ')) dir.pop_back();
  if (!dir.empty() && access((dir + "/cuobjdump").c_str(), X_OK) == 0) return "PATH=\"" + dir + ":$PATH\" " + dir + "/cuobjdump";
  return "";
}

}  // namespace

std::string disassemble(const std::vector<char>& cubin) {
  const std::string tool = find_cuobjdump();
  if (tool.empty()) return "";
  char path[] = "/tmp/gdpa_sass_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "";
  close(fd);
  std::ofstream(path, std::ios::binary).write(cubin.data(), std::streamsize(cubin.size()));
  const std::string sass = run(tool + " -sass " + path + " 2>/dev/null");
  std::remove(path);
  return sass;
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size())) ++n;
  return n;
}

}  // namespace gdpa
