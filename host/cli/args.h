// args.h — the CLI's argument parser: `--name value`, `--flag`, and positional words.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

namespace gdpa::cli {

class Args {
 public:
  // `flags` are the options that take no value; every other --option takes one.
  Args(int argc, char** argv, int first, const std::set<std::string>& flags);
  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback) const;
  int get_int(const std::string& name, int fallback) const;
  double get_double(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Throws std::runtime_error naming the first option not in `known`.
  void check_known(const std::set<std::string>& known) const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// "a,b,c" -> {"a", "b", "c"} (empty string -> {}).
std::vector<std::string> split_list(const std::string& s);

}  // namespace gdpa::cli
