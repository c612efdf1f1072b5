// InternedString: a string stored once per process. Trace records repeat the same few
// hundred strings (op names, overloads, dtypes, devices, argument names, module paths,
// kernel names) across millions of ops; each record holds an 8-byte pointer into a
// process-wide pool instead of a 32-byte std::string (plus a heap block when longer than
// the small-string buffer). The pool is thread-safe and never frees: a pointer stays valid
// for the life of the process, so records can be copied and compared without locking.
// Reads like a const std::string: converts to `const std::string&` and std::string_view,
// compares with strings, and offers the members call sites use.
#pragma once

#include <compare>
#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace habitat {

class InternedString {
 public:
  using size_type = std::string::size_type;
  using const_iterator = std::string::const_iterator;
  static constexpr size_type npos = std::string::npos;

  InternedString() = default;
  InternedString(std::string_view s) : s_(intern(s)) {}    // NOLINT: a string converts implicitly
  InternedString(const std::string& s) : s_(intern(s)) {}  // NOLINT
  InternedString(const char* s) : s_(intern(s)) {}         // NOLINT

  const std::string& str() const { return s_ != nullptr ? *s_ : empty_string(); }
  operator const std::string&() const { return str(); }  // NOLINT
  operator std::string_view() const { return str(); }    // NOLINT

  const char* c_str() const { return str().c_str(); }
  const char* data() const { return str().data(); }
  size_type size() const { return s_ != nullptr ? s_->size() : 0; }
  size_type length() const { return size(); }
  bool empty() const { return s_ == nullptr; }
  void clear() { s_ = nullptr; }
  // Appending interns the longer string (the old one stays in the pool).
  InternedString& operator+=(std::string_view tail) {
    return *this = InternedString(concat(str(), tail));
  }
  const_iterator begin() const { return str().begin(); }
  const_iterator end() const { return str().end(); }
  char operator[](size_type i) const { return str()[i]; }
  char front() const { return str().front(); }
  char back() const { return str().back(); }
  bool starts_with(std::string_view p) const { return std::string_view(str()).starts_with(p); }
  bool starts_with(char c) const { return std::string_view(str()).starts_with(c); }
  bool ends_with(std::string_view p) const { return std::string_view(str()).ends_with(p); }
  bool ends_with(char c) const { return std::string_view(str()).ends_with(c); }
  bool contains(std::string_view p) const { return str().find(p) != npos; }
  size_type find(std::string_view p, size_type pos = 0) const { return str().find(p, pos); }
  size_type find(char c, size_type pos = 0) const { return str().find(c, pos); }
  size_type rfind(std::string_view p, size_type pos = npos) const { return str().rfind(p, pos); }
  size_type rfind(char c, size_type pos = npos) const { return str().rfind(c, pos); }
  size_type find_first_of(std::string_view p, size_type pos = 0) const {
    return str().find_first_of(p, pos);
  }
  size_type find_last_of(std::string_view p, size_type pos = npos) const {
    return str().find_last_of(p, pos);
  }
  std::string substr(size_type pos = 0, size_type n = npos) const { return str().substr(pos, n); }
  int compare(std::string_view other) const { return std::string_view(str()).compare(other); }

  // Equal strings share one pool entry, so equal pointers mean equal strings. Each shared
  // library has a pool of its own (the plugin's records are read by the engine module), so
  // different pointers still compare by content.
  friend bool operator==(const InternedString& a, const InternedString& b) {
    return a.s_ == b.s_ || (a.s_ != nullptr && b.s_ != nullptr && *a.s_ == *b.s_);
  }
  friend bool operator==(const InternedString& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const InternedString& a, std::string_view b) {
    return std::string_view(a.str()) == b;
  }
  friend bool operator==(const InternedString& a, const char* b) {
    return std::string_view(a.str()) == b;
  }
  friend std::strong_ordering operator<=>(const InternedString& a, const InternedString& b) {
    if (a.s_ == b.s_) return std::strong_ordering::equal;
    return a.str().compare(b.str()) <=> 0;
  }
  friend std::strong_ordering operator<=>(const InternedString& a, std::string_view b) {
    return std::string_view(a.str()).compare(b) <=> 0;
  }

  friend std::string operator+(const InternedString& a, std::string_view b) {
    return concat(a.str(), b);
  }
  friend std::string operator+(const InternedString& a, const std::string& b) {
    return concat(a.str(), b);
  }
  friend std::string operator+(const InternedString& a, const char* b) {
    return concat(a.str(), b);
  }
  friend std::string operator+(const InternedString& a, char b) { return a.str() + b; }
  friend std::string operator+(const InternedString& a, const InternedString& b) {
    return concat(a.str(), b.str());
  }
  friend std::string operator+(std::string_view a, const InternedString& b) {
    return concat(a, b.str());
  }
  friend std::string operator+(const std::string& a, const InternedString& b) {
    return concat(a, b.str());
  }
  friend std::string operator+(const char* a, const InternedString& b) {
    return concat(a, b.str());
  }
  friend std::string operator+(std::string&& a, const InternedString& b) {
    return std::move(a) + b.str();
  }
  friend std::string operator+(char a, const InternedString& b) { return a + b.str(); }
  friend std::ostream& operator<<(std::ostream& os, const InternedString& s) {
    return os << s.str();
  }

 private:
  static const std::string* intern(std::string_view s);
  static const std::string& empty_string();
  static std::string concat(std::string_view a, std::string_view b) {
    std::string out;
    out.reserve(a.size() + b.size());
    out.append(a);
    out.append(b);
    return out;
  }

  const std::string* s_ = nullptr;  // null for the empty string
};

}  // namespace habitat

template <>
struct std::hash<habitat::InternedString> {
  std::size_t operator()(const habitat::InternedString& s) const noexcept {
    return std::hash<std::string_view>{}(s);  // by content: pools differ between libraries
  }
};
