// OpIndex: an op's position in its step by id. Captured steps (and the traces written from
// them) number their ops 0..n-1 in order, so the position is the id itself and no table is
// built; other steps fall back to a hash map (a step of a million ops would spend tens of MB
// on one while it is forecast).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "habitat/trace.h"

namespace habitat {

class OpIndex {
 public:
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

  explicit OpIndex(const Step& step) : size_(step.ops.size()) {
    for (std::size_t i = 0; i < size_; ++i) {
      if (step.ops[i].id != i) {
        dense_ = false;
        break;
      }
    }
    if (dense_) return;
    positions_.reserve(size_);
    for (std::size_t i = 0; i < size_; ++i)
      positions_[step.ops[i].id] = i;  // the last of a repeated id wins
  }

  // The position of the op numbered `id`, or npos when the step has none.
  std::size_t find(uint64_t id) const {
    if (dense_) return id < size_ ? static_cast<std::size_t>(id) : npos;
    const auto it = positions_.find(id);
    return it == positions_.end() ? npos : it->second;
  }

 private:
  std::size_t size_;
  bool dense_ = true;
  std::unordered_map<uint64_t, std::size_t> positions_;
};

}  // namespace habitat
