// Reading JSON documents with errors that name where the problem is:
// "steps[0].ops[3] (aten::mm).args[1].tensor.shape[0]: must be >= 0, got -1". The one reader
// for traces (trace_json.cpp), device databases (hardware/device.cpp) and learned-model
// metadata (learned/learned_model.cpp); each adds the file or document it was reading.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

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

// Parses a whole document; DecodeError "not valid JSON (truncated or corrupt file?): ...".
json parse(std::string_view text);

[[noreturn]] void fail(const Loc& loc, const std::string& what);
// "expected <expected>, got <json type>"
[[noreturn]] void fail_type(const json& j, const Loc& loc, const char* expected);
const json& expect_object(const json& j, const Loc& loc);
const json& expect_array(const json& j, const Loc& loc);
const json* find(const json& obj, const char* key);
const json& required(const json& obj, const Loc& loc, const char* key);

// Calls read(value, loc) when `key` is present.
template <class Read>
void optional(const json& obj, const Loc& loc, const char* key, Read&& read) {
  if (const json* v = find(obj, key)) read(*v, loc.child(key));
}

int64_t read_int(const json& j, const Loc& loc);
int64_t read_count(const json& j, const Loc& loc);  // an integer >= 0
uint64_t read_id(const json& j, const Loc& loc);    // an unsigned integer
int read_int32(const json& j, const Loc& loc, int min);
double read_duration(const json& j, const Loc& loc);  // a number >= 0
// A number, or "inf", "-inf", "nan" (JSON has none of them).
double read_real(const json& j, const Loc& loc);
bool read_bool(const json& j, const Loc& loc);
std::string read_string(const json& j, const Loc& loc);
std::vector<std::string> read_strings(const json& j, const Loc& loc);
std::vector<int64_t> read_ints(const json& j, const Loc& loc, bool non_negative);
std::vector<int64_t> read_bools(const json& j, const Loc& loc);

}  // namespace habitat::json_reader
