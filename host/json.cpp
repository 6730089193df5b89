#include "json.h"

#include <cmath>
#include <cstdio>

namespace gdpa {

Json Json::object() { return Json(); }
Json Json::array() {
  Json j;
  j.kind_ = kArray;
  return j;
}
Json Json::number(double v) {
  Json j;
  j.kind_ = kNumber;
  j.num_ = v;
  return j;
}
Json Json::string(const std::string& s) {
  Json j;
  j.kind_ = kString;
  j.str_ = s;
  return j;
}
Json Json::boolean(bool b) {
  Json j;
  j.kind_ = kBool;
  j.num_ = b ? 1 : 0;
  return j;
}
Json& Json::set(const std::string& key, const Json& value) {
  members_.emplace_back(key, value);
  return *this;
}
Json& Json::push(const Json& value) {
  items_.push_back(value);
  return *this;
}

namespace {
void escape(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}
}  // namespace

void Json::write(std::string& out, int indent, int depth) const {
  const std::string pad(size_t(indent * (depth + 1)), ' '), end_pad(size_t(indent * depth), ' ');
  switch (kind_) {
    case kNumber: {
      if (!std::isfinite(num_)) {
        out += "null";  // JSON has no NaN/Inf
      } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", num_);
        out += buf;
      }
      break;
    }
    case kString:
      escape(out, str_);
      break;
    case kBool:
      out += num_ != 0 ? "true" : "false";
      break;
    case kArray: {
      out += '[';
      for (size_t i = 0; i < items_.size(); ++i) {
        out += i ? ",\n" : "\n";
        out += pad;
        items_[i].write(out, indent, depth + 1);
      }
      if (!items_.empty()) out += "\n" + end_pad;
      out += ']';
      break;
    }
    case kObject: {
      out += '{';
      for (size_t i = 0; i < members_.size(); ++i) {
        out += i ? ",\n" : "\n";
        out += pad;
        escape(out, members_[i].first);
        out += ": ";
        members_[i].second.write(out, indent, depth + 1);
      }
      if (!members_.empty()) out += "\n" + end_pad;
      out += '}';
      break;
    }
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  out += '\n';
  return out;
}

}  // namespace gdpa
