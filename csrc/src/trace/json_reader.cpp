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

std::string too_deep_message() {
  return "not valid JSON (truncated or corrupt file?): nested more than " +
         std::to_string(kMaxJsonDepth) + " levels deep";
}

namespace {
struct TooDeep {};
}  // namespace

json parse(std::string_view text) {
  // nlohmann parses without recursion, but dumping or copying a value recurses: a document
  // nested a million levels deep would overflow the stack later (a device file's error
  // message quotes the bad value).
  const json::parser_callback_t depth_cap = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), depth_cap);
  } catch (const TooDeep&) {
    throw DecodeError{too_deep_message()};
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number overflow
    throw DecodeError{std::string("not valid JSON (truncated or corrupt file?): ") + e.what()};
  }
}

[[noreturn]] void fail(const Loc& loc, const std::string& what) {
  const std::string where = loc.str();
  throw DecodeError{where.empty() ? what : where + ": " + what};
}

}  // namespace habitat::json_reader
