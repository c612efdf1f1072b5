// json_dom reads exactly what nlohmann::json reads: the same values (numbers of every kind,
// escapes, UTF-8, the last of duplicated keys) and, for text that is not JSON, the same error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trace/json_dom.h"
#include "trace/json_reader.h"

namespace habitat::json_reader {
namespace {

std::string error_of(const std::string& text, bool dom) {
  try {
    if (dom) {
      parse_document(text);
    } else {
      parse(text);
    }
  } catch (const DecodeError& e) {
    return e.message;
  }
  return "(accepted)";
}

TEST(JsonDom, ReadsWhatNlohmannReads) {
  const std::vector<std::string> documents = {
      R"({"a": 1, "b": [1, -2, 3.5, 1e3, -0, 0.0, 18446744073709551615, 18446744073709551616,
          -9223372036854775808, -9223372036854775809, 1E-7, 2.5e+2], "c": {"d": null, "e": true,
          "f": false, "g": "x\"y\\z\/\b\f\n\r\t\u00e9\ud83d\ude00"}, "h": ")"
      "caf\\u00e9 \xc3\xa9 \xf0\x9f\x98\x80\"}",
      R"([])",
      R"({})",
      R"("plain")",
      "  \n\t 42 \r\n",
      R"([[[[]]], {"": ""}])",
      "\xEF\xBB\xBF{\"bom\": 1}",
      R"({"k": 1, "k": 2})",
      R"(0.1)",
      R"(123456789012345678901234567890)",
      R"(-1.7976931348623157e308)",
      R"(4.9e-324)",
  };
  for (const auto& text : documents) {
    const nlohmann::json expected = nlohmann::json::parse(text);
    const Document doc = parse_document(text);
    EXPECT_EQ(doc.root().to_nlohmann(), expected) << text;
    EXPECT_EQ(doc.root().dump(), expected.dump()) << text;
    EXPECT_EQ(std::string(doc.root().type_name()), std::string(expected.type_name())) << text;
  }
}

TEST(JsonDom, NumberKindsMatchNlohmann) {
  const Document doc = parse_document(R"([1, -1, 1.0, 18446744073709551616])");
  const Value& a = doc.root();
  EXPECT_TRUE(a[0].is_number_unsigned());
  EXPECT_TRUE(a[1].is_number_integer() && !a[1].is_number_unsigned());
  EXPECT_TRUE(a[2].is_number_float());
  EXPECT_TRUE(a[3].is_number_float());  // past 64 bits: a double, as nlohmann stores it
  EXPECT_EQ(a[1].get<int64_t>(), -1);
}

TEST(JsonDom, LastDuplicateKeyWins) {
  const Document doc = parse_document(R"({"k": 1, "k": 2})");
  ASSERT_NE(doc.root().find("k"), nullptr);
  EXPECT_EQ(doc.root().find("k")->get<int64_t>(), 2);
  EXPECT_EQ(doc.root().find("missing"), nullptr);
}

TEST(JsonDom, RejectsWhatNlohmannRejectsWithItsMessage) {
  const std::vector<std::string> bad = {
      "",
      "{",
      "[1,]",
      R"({"a" 1})",
      R"({"a": 1,})",
      "01",
      "1.",
      ".5",
      "-",
      "1e",
      "+1",
      "tru",
      "nul",
      R"("unterminated)",
      "\"tab\there\"",
      R"("\x")",
      R"("\u12")",
      R"("\ud800")",
      R"("\udc00")",
      R"("\ud800\u0041")",
      "\"\xff\"",
      "\"\xc0\x80\"",
      "\"\xed\xa0\x80\"",
      "\"\xf4\x90\x80\x80\"",
      "[1] 2",
      "{\"a\":1}}",
      "\xEF\xBB",
      "NaN",
      "1e400",
      "[-1e999]",
  };
  for (const auto& text : bad) {
    const std::string expected = error_of(text, false);
    ASSERT_NE(expected, "(accepted)") << text;
    EXPECT_EQ(error_of(text, true), expected) << text;
  }
}

TEST(JsonDom, RefusesAbsurdNesting) {
  const std::string deep = std::string(1000, '[') + std::string(1000, ']');
  EXPECT_NE(error_of(deep, true).find("nested more than"), std::string::npos);
}

}  // namespace
}  // namespace habitat::json_reader
