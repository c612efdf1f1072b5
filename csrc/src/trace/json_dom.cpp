#include "trace/json_dom.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "trace/json_reader.h"

namespace habitat::json_reader {

// Blocks of memory handed out in order and freed together; strings kept beside them.
struct Document::Arena {
  std::vector<std::unique_ptr<std::byte[]>> blocks;
  std::byte* next = nullptr;
  std::size_t left = 0;
  std::deque<std::string> strings;

  template <class T>
  T* allocate(std::size_t n) {
    static_assert(std::is_trivially_destructible_v<T> && alignof(T) <= 8);
    std::size_t bytes = (n * sizeof(T) + 7) & ~std::size_t{7};
    if (bytes > left) {
      const std::size_t size = std::max<std::size_t>(bytes, std::size_t{1} << 20);
      blocks.push_back(std::make_unique<std::byte[]>(size));
      next = blocks.back().get();
      left = size;
    }
    T* out = reinterpret_cast<T*>(next);
    next += bytes;
    left -= bytes;
    return out;
  }
};

Document::Document() : arena_(std::make_unique<Arena>()) {}
Document::~Document() = default;
Document::Document(Document&&) noexcept = default;
Document& Document::operator=(Document&&) noexcept = default;

namespace {

struct Reject {};   // not JSON as this parser reads it: nlohmann gives the message
struct TooDeep {};  // valid JSON maybe, but deeper than any trace
constexpr int kMaxDepth = kMaxJsonDepth;

const Value& null_value() {
  static const Value null;
  return null;
}

}  // namespace

class Parser {
 public:
  Parser(std::string_view text, Document::Arena& arena)
      : p_(text.data()), end_(text.data() + text.size()), arena_(arena) {}

  const Value* parse() {
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;  // a UTF-8 BOM
    Value* root = arena_.allocate<Value>(1);
    new (root) Value();
    value(*root, 0);
    skip_space();
    if (p_ != end_) throw Reject{};
    return root;
  }

  // A value of an nlohmann tree, copied into the arena (the rare document this parser
  // refused and nlohmann accepted).
  const Value* copy(const nlohmann::json& j) {
    Value* v = arena_.allocate<Value>(1);
    new (v) Value();
    copy_into(*v, j);
    return v;
  }

 private:
  void copy_into(Value& v, const nlohmann::json& j) {
    using T = Value::Type;
    if (j.is_boolean()) {
      v.type_ = T::Boolean;
      v.boolean_ = j.get<bool>();
    } else if (j.is_number_unsigned()) {
      v.type_ = T::Unsigned;
      v.unsigned_ = j.get<uint64_t>();
    } else if (j.is_number_integer()) {
      v.type_ = T::Integer;
      v.integer_ = j.get<int64_t>();
    } else if (j.is_number_float()) {
      v.type_ = T::Float;
      v.float_ = j.get<double>();
    } else if (j.is_string()) {
      v.type_ = T::String;
      v.string_ = &arena_.strings.emplace_back(j.get<std::string>());
    } else if (j.is_array()) {
      Value* items = arena_.allocate<Value>(j.size());
      for (std::size_t i = 0; i < j.size(); ++i) {
        new (&items[i]) Value();
        copy_into(items[i], j[i]);
      }
      v.type_ = T::Array;
      v.count_ = static_cast<uint32_t>(j.size());
      v.items_ = items;
    } else if (j.is_object()) {
      Member* members = arena_.allocate<Member>(j.size());
      std::size_t i = 0;
      for (const auto& [key, value] : j.items()) {
        new (&members[i]) Member{arena_.strings.emplace_back(key), Value()};
        copy_into(members[i].value, value);
        ++i;
      }
      v.type_ = T::Object;
      v.count_ = static_cast<uint32_t>(j.size());
      v.members_ = members;
    }
  }

  void skip_space() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  void literal(const char* word, std::size_t n) {
    if (static_cast<std::size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) throw Reject{};
    p_ += n;
  }

  void value(Value& out, int depth) {
    skip_space();
    if (p_ == end_) throw Reject{};
    using T = Value::Type;
    switch (*p_) {
      case '{':
        object(out, depth + 1);
        return;
      case '[':
        array(out, depth + 1);
        return;
      case '"':
        ++p_;
        out.type_ = T::String;
        out.string_ = &arena_.strings.emplace_back(string_text());
        return;
      case 't':
        literal("true", 4);
        out.type_ = T::Boolean;
        out.boolean_ = true;
        return;
      case 'f':
        literal("false", 5);
        out.type_ = T::Boolean;
        out.boolean_ = false;
        return;
      case 'n':
        literal("null", 4);
        out.type_ = T::Null;
        return;
      default:
        number(out);
    }
  }

  void array(Value& out, int depth) {
    if (depth > kMaxDepth) throw TooDeep{};
    ++p_;  // '['
    const std::size_t base = values_.size();
    skip_space();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
    } else {
      while (true) {
        Value item;
        value(item, depth);  // a nested array uses values_ above our elements, then pops them
        values_.push_back(item);
        skip_space();
        if (p_ == end_) throw Reject{};
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ != ']') throw Reject{};
        ++p_;
        break;
      }
    }
    const std::size_t n = values_.size() - base;
    Value* items = arena_.allocate<Value>(n);
    // An empty array: memcpy from the null data() of an empty vector is undefined (found by
    // tests/fuzz/fuzz_trace_reader.cpp under UBSan).
    if (n != 0) std::memcpy(static_cast<void*>(items), values_.data() + base, n * sizeof(Value));
    values_.resize(base);
    out.type_ = Value::Type::Array;
    out.count_ = static_cast<uint32_t>(n);
    out.items_ = items;
  }

  void object(Value& out, int depth) {
    if (depth > kMaxDepth) throw TooDeep{};
    ++p_;  // '{'
    const std::size_t base = members_.size();
    skip_space();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
    } else {
      while (true) {
        skip_space();
        if (p_ == end_ || *p_ != '"') throw Reject{};
        ++p_;
        const std::string_view key = key_text();
        skip_space();
        if (p_ == end_ || *p_ != ':') throw Reject{};
        ++p_;
        Value item;
        value(item, depth);
        members_.push_back(Member{key, item});
        skip_space();
        if (p_ == end_) throw Reject{};
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ != '}') throw Reject{};
        ++p_;
        break;
      }
    }
    const std::size_t n = members_.size() - base;
    Member* members = arena_.allocate<Member>(n);
    if (n != 0) {
      std::memcpy(static_cast<void*>(members), members_.data() + base, n * sizeof(Member));
    }
    members_.resize(base);
    out.type_ = Value::Type::Object;
    out.count_ = static_cast<uint32_t>(n);
    out.members_ = members;
  }

  // The text of a string whose opening quote was read: a view of the document when it has
  // no escapes (the common case), else a decoded copy kept in the arena.
  std::string_view key_text() {
    const char* start = p_;
    while (p_ != end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        const std::string_view view(start, static_cast<std::size_t>(p_ - start));
        ++p_;
        return view;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) break;
      ++p_;
    }
    p_ = start;
    return arena_.strings.emplace_back(string_text());
  }

  std::string string_text() {
    const char* start = p_;
    while (p_ != end_) {  // fast path: plain ASCII
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        std::string out(start, static_cast<std::size_t>(p_ - start));
        ++p_;
        return out;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) break;
      ++p_;
    }
    std::string out(start, static_cast<std::size_t>(p_ - start));
    while (true) {
      if (p_ == end_) throw Reject{};
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return out;
      }
      if (c < 0x20) throw Reject{};
      if (c == '\\') {
        escape(out);
      } else if (c < 0x80) {
        out += static_cast<char>(c);
        ++p_;
      } else {
        utf8(out);
      }
    }
  }

  // One UTF-8 sequence, checked as strictly as nlohmann does (RFC 3629).
  void utf8(std::string& out) {
    const auto byte = [&](std::ptrdiff_t i) {
      return p_ + i < end_ ? static_cast<unsigned char>(p_[i]) : 0u;
    };
    const unsigned c = byte(0);
    const auto cont = [&](std::ptrdiff_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
      const unsigned b = byte(i);
      if (b < lo || b > hi) throw Reject{};
    };
    int n;
    if (c >= 0xC2 && c <= 0xDF) {
      cont(1);
      n = 2;
    } else if (c == 0xE0) {
      cont(1, 0xA0, 0xBF), cont(2);
      n = 3;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      cont(1), cont(2);
      n = 3;
    } else if (c == 0xED) {
      cont(1, 0x80, 0x9F), cont(2);
      n = 3;
    } else if (c == 0xF0) {
      cont(1, 0x90, 0xBF), cont(2), cont(3);
      n = 4;
    } else if (c >= 0xF1 && c <= 0xF3) {
      cont(1), cont(2), cont(3);
      n = 4;
    } else if (c == 0xF4) {
      cont(1, 0x80, 0x8F), cont(2), cont(3);
      n = 4;
    } else {
      throw Reject{};
    }
    out.append(p_, static_cast<std::size_t>(n));
    p_ += n;
  }

  unsigned hex4() {
    if (end_ - p_ < 4) throw Reject{};
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else
        throw Reject{};
    }
    return v;
  }

  void escape(std::string& out) {
    ++p_;  // '\'
    if (p_ == end_) throw Reject{};
    const char c = *p_++;
    switch (c) {
      case '"':
        out += '"';
        return;
      case '\\':
        out += '\\';
        return;
      case '/':
        out += '/';
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:
        throw Reject{};
    }
    unsigned cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) throw Reject{};  // a low surrogate alone
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') throw Reject{};
      p_ += 2;
      const unsigned low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) throw Reject{};
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  static bool digit(const char* p, const char* end) { return p != end && *p >= '0' && *p <= '9'; }

  // JSON's number grammar; integers that fit in 64 bits stay integers (unsigned when >= 0,
  // as nlohmann stores them), the rest are doubles from strtod, as nlohmann reads them.
  void number(Value& out) {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ != end_ && *p_ == '0') {
      ++p_;
    } else if (digit(p_, end_)) {
      while (digit(p_, end_)) ++p_;
    } else {
      throw Reject{};
    }
    bool is_float = false;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (!digit(p_, end_)) throw Reject{};
      while (digit(p_, end_)) ++p_;
      is_float = true;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digit(p_, end_)) throw Reject{};
      while (digit(p_, end_)) ++p_;
      is_float = true;
    }
    if (!is_float) {
      if (negative) {
        int64_t v = 0;
        const auto [at, ec] = std::from_chars(start, p_, v);
        if (ec == std::errc() && at == p_) {
          out.type_ = Value::Type::Integer;
          out.integer_ = v;
          return;
        }
      } else {
        uint64_t v = 0;
        const auto [at, ec] = std::from_chars(start, p_, v);
        if (ec == std::errc() && at == p_) {
          out.type_ = Value::Type::Unsigned;
          out.unsigned_ = v;
          return;
        }
      }
    }
    const std::string token(start, p_);  // strtod needs the terminating NUL
    out.type_ = Value::Type::Float;
    out.float_ = std::strtod(token.c_str(), nullptr);
    if (!std::isfinite(out.float_)) throw Reject{};  // nlohmann: "number overflow"
  }

  const char* p_;
  const char* end_;
  Document::Arena& arena_;
  std::vector<Value> values_;    // elements of the arrays being read, innermost last
  std::vector<Member> members_;  // members of the objects being read, innermost last
};

const Value* Value::find(std::string_view key) const {
  if (type_ != Type::Object) return nullptr;
  for (std::size_t i = count_; i-- > 0;) {  // from the end: the last of a duplicated key
    if (members_[i].key == key) return &members_[i].value;
  }
  return nullptr;
}

const Value& Value::operator[](std::string_view key) const {
  const Value* v = find(key);
  return v != nullptr ? *v : null_value();
}

const char* Value::type_name() const {
  switch (type_) {
    case Type::Null:
      return "null";
    case Type::Boolean:
      return "boolean";
    case Type::Integer:
    case Type::Unsigned:
    case Type::Float:
      return "number";
    case Type::String:
      return "string";
    case Type::Array:
      return "array";
    case Type::Object:
      return "object";
  }
  return "null";
}

nlohmann::json Value::to_nlohmann() const {
  switch (type_) {
    case Type::Null:
      return nullptr;
    case Type::Boolean:
      return boolean_;
    case Type::Integer:
      return integer_;
    case Type::Unsigned:
      return unsigned_;
    case Type::Float:
      return float_;
    case Type::String:
      return *string_;
    case Type::Array: {
      nlohmann::json out = nlohmann::json::array();
      for (std::size_t i = 0; i < count_; ++i) out.push_back(items_[i].to_nlohmann());
      return out;
    }
    case Type::Object: {
      nlohmann::json out = nlohmann::json::object();
      for (std::size_t i = 0; i < count_; ++i)
        out[std::string(members_[i].key)] = members_[i].value.to_nlohmann();
      return out;
    }
  }
  return nullptr;
}

std::string Value::dump() const { return to_nlohmann().dump(); }

Document parse_document(std::string_view text) {
  Document doc;
  try {
    doc.root_ = Parser(text, *doc.arena_).parse();
    return doc;
  } catch (const Reject&) {
  } catch (const TooDeep&) {
    throw DecodeError{too_deep_message()};
  }
  // Not JSON as read here: nlohmann's parser says why (or, should it accept the text after
  // all, its tree is used).
  const nlohmann::json j = parse(text);
  Document fallback;
  fallback.root_ = Parser(text, *fallback.arena_).copy(j);
  return fallback;
}

// ---------------------------------------------------------------------------------------------
// Building a document value by value

Document DocumentBuilder::make() {
  Document doc;
  Value* root = doc.arena_->allocate<Value>(1);
  new (root) Value();
  doc.root_ = root;
  return doc;
}

Value& DocumentBuilder::root(Document& doc) { return const_cast<Value&>(*doc.root_); }

void DocumentBuilder::set_null(Value& v) { v.type_ = Value::Type::Null; }

void DocumentBuilder::set_bool(Value& v, bool b) {
  v.type_ = Value::Type::Boolean;
  v.boolean_ = b;
}

void DocumentBuilder::set_int(Value& v, int64_t i) {
  if (i < 0) {
    v.type_ = Value::Type::Integer;
    v.integer_ = i;
  } else {
    set_uint(v, static_cast<uint64_t>(i));
  }
}

void DocumentBuilder::set_uint(Value& v, uint64_t u) {
  v.type_ = Value::Type::Unsigned;
  v.unsigned_ = u;
}

void DocumentBuilder::set_real(Value& v, double d) {
  v.type_ = Value::Type::Float;
  v.float_ = d;
}

void DocumentBuilder::set_string(Document& doc, Value& v, std::string_view s) {
  v.type_ = Value::Type::String;
  v.string_ = &doc.arena_->strings.emplace_back(s);
}

Value* DocumentBuilder::set_array(Document& doc, Value& v, std::size_t n) {
  Value* items = doc.arena_->allocate<Value>(n);
  for (std::size_t i = 0; i < n; ++i) new (&items[i]) Value();
  v.type_ = Value::Type::Array;
  v.count_ = static_cast<uint32_t>(n);
  v.items_ = items;
  return items;
}

Member* DocumentBuilder::set_object(Document& doc, Value& v, std::size_t n) {
  Member* members = doc.arena_->allocate<Member>(n);
  for (std::size_t i = 0; i < n; ++i) new (&members[i]) Member{std::string_view{}, Value()};
  v.type_ = Value::Type::Object;
  v.count_ = static_cast<uint32_t>(n);
  v.members_ = members;
  return members;
}

Member& DocumentBuilder::member(Value& object, std::size_t i) {
  return const_cast<Member&>(object.members_[i]);
}

void DocumentBuilder::set_key(Document& doc, Member& m, std::string_view key) {
  char* text = doc.arena_->allocate<char>(key.size());
  if (!key.empty()) std::memcpy(text, key.data(), key.size());
  m.key = std::string_view(text, key.size());
}

}  // namespace habitat::json_reader
