#include "habitat/interned_string.h"

#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace habitat {
namespace {

struct Hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

// The strings live in the set's nodes, whose addresses never change (rehashing moves
// buckets, not nodes), and are never erased.
struct Pool {
  std::shared_mutex mutex;
  std::unordered_set<std::string, Hash, std::equal_to<>> strings;
};

// Never destroyed: records in other static objects, or a thread still forecasting at exit,
// may read their strings after static destruction began.
union Immortal {
  Pool pool;
  Immortal() : pool() {}
  ~Immortal() {}
};

Pool& pool() {
  static Immortal p;  // constructed on first use, before any string that points into it
  return p.pool;
}

}  // namespace

const std::string* InternedString::intern(std::string_view s) {
  if (s.empty()) return nullptr;
  Pool& p = pool();
  {
    const std::shared_lock lock(p.mutex);
    if (const auto it = p.strings.find(s); it != p.strings.end()) return &*it;
  }
  const std::unique_lock lock(p.mutex);
  return &*p.strings.emplace(s).first;
}

const std::string& InternedString::empty_string() {
  // Immortal too: read by InternedString() values in other static objects at exit.
  static const std::string* const empty = [] {
    Pool& p = pool();
    const std::unique_lock lock(p.mutex);
    return &*p.strings.emplace().first;  // "" is never interned otherwise
  }();
  return *empty;
}

}  // namespace habitat
