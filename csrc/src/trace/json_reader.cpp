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
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number overflow
    throw DecodeError{std::string("not valid JSON (truncated or corrupt file?): ") + e.what()};
  }
}

[[noreturn]] void fail(const Loc& loc, const std::string& what) {
  const std::string where = loc.str();
  throw DecodeError{where.empty() ? what : where + ": " + what};
}

}  // namespace habitat::json_reader
