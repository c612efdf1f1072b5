// A read-only JSON document parsed into one arena: what trace_json.cpp reads traces from.
//
// Traces are large (a 10k-op step is ~4 MB of JSON) and read once. A general JSON library's
// tree allocates every object, key and string on its own and frees them one by one; here the
// whole tree lives in a few large blocks freed at once, which makes reading a trace several
// times faster. Accepts exactly the documents nlohmann::json accepts (the parser is strict,
// and anything it rejects is handed to nlohmann, whose message is the one reported), with
// the same numbers (integers that fit in 64 bits stay integers, others are doubles read by
// strtod) and the last value of a duplicated key. Values offer the part of nlohmann::json's
// interface that json_reader uses, so the same reading code serves both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace habitat::json_reader {

struct Member;
struct DocumentBuilder;

class Value {
 public:
  enum class Type : uint8_t { Null, Boolean, Integer, Unsigned, Float, String, Array, Object };

  bool is_null() const { return type_ == Type::Null; }
  bool is_boolean() const { return type_ == Type::Boolean; }
  bool is_number() const {
    return type_ == Type::Integer || type_ == Type::Unsigned || type_ == Type::Float;
  }
  bool is_number_integer() const { return type_ == Type::Integer || type_ == Type::Unsigned; }
  bool is_number_unsigned() const { return type_ == Type::Unsigned; }
  bool is_number_float() const { return type_ == Type::Float; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Elements of an array, members of an object (a duplicated key counts once per time it
  // appears), 0 otherwise.
  std::size_t size() const { return is_array() || is_object() ? count_ : 0; }
  const Value& operator[](std::size_t i) const { return items_[i]; }
  // The member `key` of an object (the last one when duplicated); null when absent.
  const Value* find(std::string_view key) const;
  const Value& operator[](std::string_view key) const;

  template <class T>
  T get() const {
    if constexpr (std::is_same_v<T, bool>) {
      return boolean_;
    } else if constexpr (std::is_same_v<T, std::string>) {
      return *string_;
    } else {
      static_assert(std::is_arithmetic_v<T>);
      switch (type_) {
        case Type::Integer:
          return static_cast<T>(integer_);
        case Type::Unsigned:
          return static_cast<T>(unsigned_);
        case Type::Float:
          return static_cast<T>(float_);
        default:
          return T{};
      }
    }
  }
  template <class T>
  T get_ref() const {
    static_assert(std::is_same_v<T, const std::string&>);
    return *string_;
  }

  // "null", "boolean", "number", "string", "array", "object": nlohmann's names.
  const char* type_name() const;
  // The value as nlohmann::json would dump it (error messages quote values).
  std::string dump() const;
  nlohmann::json to_nlohmann() const;

 private:
  friend class Parser;
  friend struct DocumentBuilder;
  Type type_ = Type::Null;
  uint32_t count_ = 0;
  union {
    bool boolean_;
    int64_t integer_;
    uint64_t unsigned_;
    double float_;
    const std::string* string_;
    const Value* items_;     // array elements
    const Member* members_;  // object members, in document order
  };

 public:
  Value() : integer_(0) {}
};

struct Member {
  std::string_view key;
  Value value;
};

// A parsed document: owns every value; root() lives as long as the Document, which must not
// outlive the text it was parsed from (keys may point into it).
class Document;
Document parse_document(std::string_view text);

class Document {
 public:
  Document();
  ~Document();
  Document(Document&&) noexcept;
  Document& operator=(Document&&) noexcept;
  const Value& root() const { return *root_; }

 private:
  friend class Parser;
  friend struct DocumentBuilder;
  friend Document parse_document(std::string_view text);
  struct Arena;
  std::unique_ptr<Arena> arena_;
  const Value* root_ = nullptr;
};

// Parses `text`; DecodeError "not valid JSON (truncated or corrupt file?): ..." (nlohmann's
// message) when it is not JSON, or when it nests deeper than a trace ever does.
Document parse_document(std::string_view text);

// A document built value by value instead of parsed (habitat/trace_tree.h: a caller holding
// the document as objects). Values are filled in place, each once; keys and strings are
// copied into the document's arena.
struct DocumentBuilder {
  // A document whose root is null.
  static Document make();
  static Value& root(Document& doc);
  static void set_null(Value& v);
  static void set_bool(Value& v, bool b);
  static void set_int(Value& v, int64_t i);  // negative: Integer; otherwise Unsigned, as parsed
  static void set_uint(Value& v, uint64_t u);
  static void set_real(Value& v, double d);
  static void set_string(Document& doc, Value& v, std::string_view s);
  // n null elements / n members with empty keys and null values, to be filled.
  static Value* set_array(Document& doc, Value& v, std::size_t n);
  static Member* set_object(Document& doc, Value& v, std::size_t n);
  static void set_key(Document& doc, Member& m, std::string_view key);
  // Member i of an object made by set_object.
  static Member& member(Value& object, std::size_t i);
};

}  // namespace habitat::json_reader
