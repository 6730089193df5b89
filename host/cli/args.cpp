#include "args.h"

#include <sstream>
#include <stdexcept>

namespace gdpa::cli {

Args::Args(int argc, char** argv, int first, const std::set<std::string>& flags) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value = "1";
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (!flags.count(name)) {
      if (i + 1 >= argc) throw std::runtime_error("option --" + name + " needs a value");
      value = argv[++i];
    }
    values_[name] = value;
  }
}

bool Args::has(const std::string& name) const { return values_.count(name) != 0; }

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int Args::get_int(const std::string& name, int fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name, "");
  size_t used = 0;
  int r = 0;
  try {
    r = std::stoi(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used != v.size()) throw std::runtime_error("option --" + name + " expects an integer, got '" + v + "'");
  return r;
}

double Args::get_double(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name, "");
  size_t used = 0;
  double r = 0;
  try {
    r = std::stod(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used != v.size()) throw std::runtime_error("option --" + name + " expects a number, got '" + v + "'");
  return r;
}

void Args::check_known(const std::set<std::string>& known) const {
  for (const auto& kv : values_)
    if (!known.count(kv.first)) throw std::runtime_error("unknown option --" + kv.first + " (see --help)");
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(item);
  return v;
}

}  // namespace gdpa::cli
