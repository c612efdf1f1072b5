// Reading JSON documents with errors that name where the problem is:
// "steps[0].ops[3] (aten::mm).args[1].tensor.shape[0]: must be >= 0, got -1". The one reader
// for traces (trace_json.cpp), device databases (hardware/device.cpp) and learned-model
// metadata (learned/learned_model.cpp); each adds the file or document it was reading.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "habitat/input_limits.h"

namespace habitat::json_reader {

using json = nlohmann::json;

// Where a value sits in the document. Built on the stack as the reader descends and turned
// into text only when something is wrong, so validation costs nothing on good traces.
struct Loc {
  const Loc* parent = nullptr;
  std::string_view key;   // object key; empty for an array element
  int64_t index = -1;     // array index when key is empty
  std::string_view note;  // shown in parentheses after this segment (an op's name)

  Loc child(std::string_view k) const { return Loc{this, k, -1, {}}; }
  Loc at(int64_t i) const { return Loc{this, {}, i, {}}; }

  // "steps[0].ops[3] (aten::mm).args[1]"; empty at the root.
  std::string str() const;
};

// A problem found while decoding; the public entry points add what was being read.
struct DecodeError {
  std::string message;
};

// Parses a whole document; DecodeError "not valid JSON (truncated or corrupt file?): ...",
// also for nesting deeper than kMaxJsonDepth (every JSON reader caps it).
json parse(std::string_view text);

// The message of a document nested deeper than kMaxJsonDepth.
std::string too_deep_message();

[[noreturn]] void fail(const Loc& loc, const std::string& what);

// The readers below take an nlohmann::json or a json_dom Value (trace_json.cpp reads traces
// from the faster json_dom; device and model files use nlohmann::json).

// "expected <expected>, got <json type>"
template <class J>
[[noreturn]] void fail_type(const J& j, const Loc& loc, const char* expected) {
  fail(loc, std::string("expected ") + expected + ", got " + j.type_name());
}

template <class J>
const J& expect_object(const J& j, const Loc& loc) {
  if (!j.is_object()) fail_type(j, loc, "an object");
  return j;
}

template <class J>
const J& expect_array(const J& j, const Loc& loc) {
  if (!j.is_array()) fail_type(j, loc, "an array");
  return j;
}

inline const json* find(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}
template <class J>
const J* find(const J& obj, const char* key) {
  return obj.find(key);
}

template <class J>
const J& required(const J& obj, const Loc& loc, const char* key) {
  if (const J* v = find(obj, key)) return *v;
  fail(loc.child(key), "missing required field");
}

// Calls read(value, loc) when `key` is present.
template <class J, class Read>
void optional(const J& obj, const Loc& loc, const char* key, Read&& read) {
  if (const J* v = find(obj, key)) read(*v, loc.child(key));
}

template <class J>
int64_t read_int(const J& j, const Loc& loc) {
  if (j.is_number_float() && std::isfinite(j.template get<double>()) &&
      std::floor(j.template get<double>()) == j.template get<double>()) {
    // A whole number too large for 64 bits (2^64 and up) is parsed as a double.
    fail(loc, "integer " + j.dump() + " is out of range (at most 2^63 - 1)");
  }
  if (!j.is_number_integer()) fail_type(j, loc, "an integer");
  if (j.is_number_unsigned() && j.template get<uint64_t>() > uint64_t{INT64_MAX}) {
    fail(loc, "integer " + j.dump() + " is out of range");
  }
  return j.template get<int64_t>();
}

// An integer >= 0.
template <class J>
int64_t read_count(const J& j, const Loc& loc) {
  const int64_t v = read_int(j, loc);
  if (v < 0) fail(loc, "must be >= 0, got " + std::to_string(v));
  return v;
}

// An unsigned integer.
template <class J>
uint64_t read_id(const J& j, const Loc& loc) {
  if (!j.is_number_integer()) fail_type(j, loc, "an integer");
  if (!j.is_number_unsigned()) fail(loc, "must be >= 0, got " + j.dump());
  return j.template get<uint64_t>();
}

template <class J>
int read_int32(const J& j, const Loc& loc, int min) {
  const int64_t v = read_int(j, loc);
  if (v < min) fail(loc, "must be >= " + std::to_string(min) + ", got " + std::to_string(v));
  if (v > std::numeric_limits<int>::max()) fail(loc, "integer " + j.dump() + " is out of range");
  return static_cast<int>(v);
}

// Times (us or ms) past this are not measurements but damage: sums of them must stay finite.
inline constexpr double kMaxDuration = 1e12;

// A number from 0 to kMaxDuration (times).
template <class J>
double read_duration(const J& j, const Loc& loc) {
  if (!j.is_number()) fail_type(j, loc, "a number");
  const double v = j.template get<double>();
  if (!(v >= 0)) fail(loc, "must be >= 0, got " + j.dump());
  if (v > kMaxDuration) fail(loc, "must be at most 1e12, got " + j.dump() + " (a corrupt trace?)");
  return v;
}

// A number, or "inf", "-inf", "nan" (JSON has none of them).
template <class J>
double read_real(const J& j, const Loc& loc) {
  if (j.is_number()) return j.template get<double>();
  if (j.is_string()) {
    const std::string& s = j.template get_ref<const std::string&>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  fail_type(j, loc, "a number or \"inf\", \"-inf\", \"nan\"");
}

template <class J>
bool read_bool(const J& j, const Loc& loc) {
  if (!j.is_boolean()) fail_type(j, loc, "true or false");
  return j.template get<bool>();
}

template <class J>
std::string read_string(const J& j, const Loc& loc) {
  if (!j.is_string()) fail_type(j, loc, "a string");
  return j.template get<std::string>();
}

template <class J>
std::vector<int64_t> read_ints(const J& j, const Loc& loc, bool non_negative) {
  expect_array(j, loc);
  std::vector<int64_t> out;
  out.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    const Loc item = loc.at(static_cast<int64_t>(i));
    out.push_back(non_negative ? read_count(j[i], item) : read_int(j[i], item));
  }
  return out;
}

template <class J>
std::vector<int64_t> read_bools(const J& j, const Loc& loc) {
  expect_array(j, loc);
  std::vector<int64_t> out;
  out.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    out.push_back(read_bool(j[i], loc.at(static_cast<int64_t>(i))) ? 1 : 0);
  }
  return out;
}

template <class J>
std::vector<std::string> read_strings(const J& j, const Loc& loc) {
  expect_array(j, loc);
  std::vector<std::string> out;
  out.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i)
    out.push_back(read_string(j[i], loc.at(static_cast<int64_t>(i))));
  return out;
}

}  // namespace habitat::json_reader
