// SmallInts<N>: a vector of int64_t that keeps up to N values inline and moves to the heap
// beyond. Tensor shapes and strides (rank <= 4 in almost every model) and an argument's
// ints (one or two) then cost no allocation of their own: a trace of a million ops holds
// millions of them. Reads and writes like the std::vector<int64_t> it replaced, compares
// with one, and converts to one where a caller needs a real vector.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <ostream>
#include <span>
#include <stdexcept>
#include <vector>

namespace habitat {

template <std::size_t N>
class SmallInts {
 public:
  using value_type = int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;

  SmallInts() {}
  SmallInts(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  SmallInts(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }  // NOLINT
  SmallInts(size_type n, int64_t value) { assign(n, value); }
  template <std::input_iterator It>
  SmallInts(It first, It last) {
    assign(first, last);
  }
  SmallInts(const SmallInts& other) { assign(other.begin(), other.end()); }
  SmallInts(SmallInts&& other) noexcept { take(other); }
  SmallInts& operator=(const SmallInts& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallInts& operator=(SmallInts&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  SmallInts& operator=(const std::vector<int64_t>& values) {
    assign(values.begin(), values.end());
    return *this;
  }
  SmallInts& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~SmallInts() { release(); }

  operator std::vector<int64_t>() const {
    return {begin(), end()};
  }  // NOLINT: reads as the vector it replaced

  size_type size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_type capacity() const { return capacity_; }
  int64_t* data() { return on_heap() ? heap_ : inline_; }
  const int64_t* data() const { return on_heap() ? heap_ : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  std::reverse_iterator<const_iterator> rbegin() const {
    return std::reverse_iterator<const_iterator>(end());
  }
  std::reverse_iterator<const_iterator> rend() const {
    return std::reverse_iterator<const_iterator>(begin());
  }
  int64_t& operator[](size_type i) { return data()[i]; }
  const int64_t& operator[](size_type i) const { return data()[i]; }
  int64_t& at(size_type i) {
    if (i >= size_) throw std::out_of_range("SmallInts::at");
    return data()[i];
  }
  const int64_t& at(size_type i) const {
    if (i >= size_) throw std::out_of_range("SmallInts::at");
    return data()[i];
  }
  int64_t& front() { return data()[0]; }
  const int64_t& front() const { return data()[0]; }
  int64_t& back() { return data()[size_ - 1]; }
  const int64_t& back() const { return data()[size_ - 1]; }

  void clear() { size_ = 0; }
  void reserve(size_type n) {
    if (n > capacity_) grow(n);
  }
  void push_back(int64_t v) {
    if (size_ == capacity_) grow(capacity_ * 2);
    data()[size_++] = v;
  }
  void emplace_back(int64_t v) { push_back(v); }
  void pop_back() { --size_; }
  void resize(size_type n, int64_t value = 0) {
    reserve(n);
    if (n > size_) std::fill(data() + size_, data() + n, value);
    size_ = static_cast<uint32_t>(n);
  }
  void assign(size_type n, int64_t value) {
    clear();
    resize(n, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    const auto n = static_cast<size_type>(std::distance(first, last));
    clear();
    reserve(n);
    std::copy(first, last, data());
    size_ = static_cast<uint32_t>(n);
  }
  void assign(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  iterator insert(const_iterator pos, int64_t v) {
    const auto at = pos - begin();
    push_back(v);
    std::rotate(begin() + at, end() - 1, end());
    return begin() + at;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const auto at = pos - begin();
    const size_type old = size_;
    for (; first != last; ++first) push_back(*first);
    std::rotate(begin() + at, begin() + old, end());
    return begin() + at;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto at = first - begin();
    const auto n = last - first;
    std::copy(begin() + at + n, end(), begin() + at);
    size_ -= static_cast<uint32_t>(n);
    return begin() + at;
  }

  friend bool operator==(const SmallInts& a, const SmallInts& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallInts& a, const std::vector<int64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend std::ostream& operator<<(std::ostream& os, const SmallInts& v) {
    os << '[';
    for (size_type i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    return os << ']';
  }

 private:
  bool on_heap() const { return capacity_ > N; }
  void grow(size_type n) {
    n = std::max<size_type>(n, N + 1);
    int64_t* fresh = std::allocator<int64_t>().allocate(n);
    std::copy(begin(), end(), fresh);
    release();
    heap_ = fresh;
    capacity_ = static_cast<uint32_t>(n);
  }
  void release() {
    if (on_heap()) std::allocator<int64_t>().deallocate(heap_, capacity_);
    capacity_ = N;
  }
  // Leaves `other` empty (inline).
  void take(SmallInts& other) {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.on_heap()) {
      heap_ = other.heap_;
    } else {
      std::copy(other.inline_, other.inline_ + other.size_, inline_);
    }
    other.size_ = 0;
    other.capacity_ = N;
  }

  uint32_t size_ = 0;
  uint32_t capacity_ = N;  // > N exactly when the values are on the heap
  union {
    int64_t inline_[N];
    int64_t* heap_;
  };
};

// A tensor's shape or strides.
using Dims = SmallInts<4>;

}  // namespace habitat
