// What each parser of benchmarks/scale/json_parsers.cpp makes of the inputs where JSON readers
// differ (issue 33): what a switch away from json_dom would change for trace files. json_dom
// reads as nlohmann::json does (tests/cpp/trace/test_json_dom.cpp); RapidJSON with the flags
// json_parsers.cpp uses. Built and run by benchmarks/scale/json_parsers.sh.
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <simdjson.h>

#include <cstdio>
#include <string>

#include "trace/json_dom.h"
#include "trace/json_reader.h"

namespace {

constexpr unsigned kRapidFlags = rapidjson::kParseFullPrecisionFlag |
                                 rapidjson::kParseValidateEncodingFlag |
                                 rapidjson::kParseIterativeFlag;

std::string simdjson_reads(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (const auto error = parser.parse(text.data(), text.size()).get(root)) {
    return std::string("error: ") + simdjson::error_message(error);
  }
  if (root.is_object()) {
    simdjson::dom::element a;
    if (root.get_object().at_key("a").get(a) == simdjson::SUCCESS) {
      return "a = " + simdjson::minify(a);
    }
  }
  return simdjson::minify(root).substr(0, 40);
}

std::string rapidjson_reads(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse<kRapidFlags>(text.data(), text.size());
  if (doc.HasParseError()) {
    return std::string("error at byte ") + std::to_string(doc.GetErrorOffset()) + ": " +
           rapidjson::GetParseError_En(doc.GetParseError());
  }
  if (doc.IsObject() && doc.HasMember("a")) {
    const auto& a = doc.FindMember("a")->value;
    if (a.IsUint64()) return "a = " + std::to_string(a.GetUint64());
    if (a.IsInt64()) return "a = " + std::to_string(a.GetInt64());
    if (a.IsDouble()) return "a = " + std::to_string(a.GetDouble()) + " (a double)";
    if (a.IsString()) return "a = a string of " + std::to_string(a.GetStringLength()) + " bytes";
  }
  return "parsed";
}

std::string json_dom_reads(const std::string& text) {
  try {
    const auto doc = habitat::json_reader::parse_document(text);
    if (const auto* a = doc.root().is_object() ? doc.root().find("a") : nullptr) {
      return "a = " + a->dump();
    }
    return doc.root().dump().substr(0, 40);
  } catch (const habitat::json_reader::DecodeError& e) {
    return "error: " + e.message;
  }
}

// Bytes past ASCII as \xNN: a message may quote the invalid UTF-8 it was given.
std::string printable(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x80) {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(c));
      out += hex;
    }
  }
  return out;
}

}  // namespace

int main() {
  const std::pair<const char*, std::string> cases[] = {
      {"duplicated key", R"({"a": 1, "a": 2})"},
      {"integer 2^64", R"({"a": 18446744073709551616})"},
      {"integer -2^63 - 1", R"({"a": -9223372036854775809})"},
      {"number 1e400", R"({"a": 1e400})"},
      {"UTF-8 byte order mark", "\xEF\xBB\xBF{\"a\": 1}"},
      {"invalid UTF-8 in a string", "{\"a\": \"x\xff\"}"},
      {"trailing comma", R"({"a": [1, 2,]})"},
      {"a second document", "{\"a\": 1}\n{\"b\": 2}"},
      {"300 nested arrays", std::string(300, '[') + std::string(300, ']')},
  };
  std::printf("| input | json_dom (as nlohmann) | simdjson | RapidJSON |\n|---|---|---|---|\n");
  for (const auto& [name, text] : cases) {
    std::printf("| %s | %s | %s | %s |\n", name, printable(json_dom_reads(text)).c_str(),
                printable(simdjson_reads(text)).c_str(), printable(rapidjson_reads(text)).c_str());
  }
  return 0;
}
