#include "trace/json_reader.h"

#include <limits>

namespace habitat::json_reader {

std::string Loc::str() const {
  std::string s = parent ? parent->str() : std::string();
  if (!key.empty()) {
    if (!s.empty()) s += '.';
    s += key;
  } else if (index >= 0) {
    s += '[' + std::to_string(index) + ']';
  }
  if (!note.empty()) s += " (" + std::string(note) + ")";
  return s;
}

json parse(std::string_view text) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw DecodeError{std::string("not valid JSON (truncated or corrupt file?): ") + e.what()};
  }
}

[[noreturn]] void fail(const Loc& loc, const std::string& what) {
  const std::string where = loc.str();
  throw DecodeError{where.empty() ? what : where + ": " + what};
}

[[noreturn]] void fail_type(const json& j, const Loc& loc, const char* expected) {
  fail(loc, std::string("expected ") + expected + ", got " + j.type_name());
}

const json& expect_object(const json& j, const Loc& loc) {
  if (!j.is_object()) fail_type(j, loc, "an object");
  return j;
}

const json& expect_array(const json& j, const Loc& loc) {
  if (!j.is_array()) fail_type(j, loc, "an array");
  return j;
}

const json* find(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& required(const json& obj, const Loc& loc, const char* key) {
  if (const json* v = find(obj, key)) return *v;
  fail(loc.child(key), "missing required field");
}

int64_t read_int(const json& j, const Loc& loc) {
  if (!j.is_number_integer()) fail_type(j, loc, "an integer");
  if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t{INT64_MAX}) {
    fail(loc, "integer " + j.dump() + " is out of range");
  }
  return j.get<int64_t>();
}

int64_t read_count(const json& j, const Loc& loc) {
  const int64_t v = read_int(j, loc);
  if (v < 0) fail(loc, "must be >= 0, got " + std::to_string(v));
  return v;
}

uint64_t read_id(const json& j, const Loc& loc) {
  if (!j.is_number_integer()) fail_type(j, loc, "an integer");
  if (!j.is_number_unsigned()) fail(loc, "must be >= 0, got " + j.dump());
  return j.get<uint64_t>();
}

int read_int32(const json& j, const Loc& loc, int min) {
  const int64_t v = read_int(j, loc);
  if (v < min) fail(loc, "must be >= " + std::to_string(min) + ", got " + std::to_string(v));
  if (v > std::numeric_limits<int>::max()) fail(loc, "integer " + j.dump() + " is out of range");
  return static_cast<int>(v);
}

// Non-negative finite quantity (times).
double read_duration(const json& j, const Loc& loc) {
  if (!j.is_number()) fail_type(j, loc, "a number");
  const double v = j.get<double>();
  if (!(v >= 0)) fail(loc, "must be >= 0, got " + j.dump());
  return v;
}

double read_real(const json& j, const Loc& loc) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  fail_type(j, loc, "a number or \"inf\", \"-inf\", \"nan\"");
}

bool read_bool(const json& j, const Loc& loc) {
  if (!j.is_boolean()) fail_type(j, loc, "true or false");
  return j.get<bool>();
}

std::string read_string(const json& j, const Loc& loc) {
  if (!j.is_string()) fail_type(j, loc, "a string");
  return j.get<std::string>();
}

std::vector<int64_t> read_ints(const json& j, const Loc& loc, bool non_negative) {
  expect_array(j, loc);
  std::vector<int64_t> out;
  out.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    const Loc item = loc.at(static_cast<int64_t>(i));
    out.push_back(non_negative ? read_count(j[i], item) : read_int(j[i], item));
  }
  return out;
}

std::vector<int64_t> read_bools(const json& j, const Loc& loc) {
  expect_array(j, loc);
  std::vector<int64_t> out;
  out.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    out.push_back(read_bool(j[i], loc.at(static_cast<int64_t>(i))) ? 1 : 0);
  }
  return out;
}

std::vector<std::string> read_strings(const json& j, const Loc& loc) {
  expect_array(j, loc);
  std::vector<std::string> out;
  out.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) out.push_back(read_string(j[i], loc.at(static_cast<int64_t>(i))));
  return out;
}

}  // namespace habitat::json_reader
