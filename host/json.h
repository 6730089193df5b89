// json.h — a minimal JSON writer for results files (objects, arrays, numbers, strings).
#pragma once
#include <string>
#include <vector>

namespace gdpa {

class Json {
 public:
  static Json object();
  static Json array();
  static Json number(double v);
  static Json string(const std::string& s);
  static Json boolean(bool b);
  Json& set(const std::string& key, const Json& value);  // objects
  Json& push(const Json& value);                         // arrays
  std::string dump(int indent = 2) const;

 private:
  enum Kind { kObject, kArray, kNumber, kString, kBool } kind_ = kObject;
  double num_ = 0;
  std::string str_;
  std::vector<std::pair<std::string, Json>> members_;
  std::vector<Json> items_;
  void write(std::string& out, int indent, int depth) const;
};

}  // namespace gdpa
