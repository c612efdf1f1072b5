// Every difference between the torch releases Habitat builds against (2.4-2.15) is handled
// here, so the capture code reads the same for all of them. Where a feature can be detected
// from the types themselves it is (that also covers releases between the ones CI compiles);
// a difference that cannot be detected is keyed on TORCH_VERSION_MAJOR/MINOR.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

// c10d's ProcessGroup, for the size and rank of a collective's group. Builds of torch without
// distributed support ship no c10d headers; their collectives cannot run either.
#if __has_include(<torch/csrc/distributed/c10d/ProcessGroup.hpp>)
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define HABITAT_HAS_C10D 1
#endif

namespace habitat::capture::compat {

// The releases supported are python/habitat/_version.py's SUPPORTED_TORCH (setup.py refuses
// to build against an older one).

// The thread-local debug-info slot a capture session lives in. Up to torch 2.12
// c10::DebugInfoKind is an enum of fixed slots, and the one no library code uses is
// TEST_INFO_2; later releases make it a class whose identity is the address of a name, so
// Habitat gets a slot of its own.
template <class Kind = c10::DebugInfoKind>
Kind session_debug_info_kind() {
  if constexpr (std::is_enum_v<Kind>) {
    return Kind::TEST_INFO_2;
  } else {
    static constexpr std::string_view kName = "HABITAT_CAPTURE_SESSION";
    return Kind(&kName);
  }
}

// (size, rank) of a c10d process group passed to a c10d op (c10d::allreduce_ and the like take
// it as a custom-class object); nullopt for any other value. Reads only the group's size and
// this process's rank: the group itself is never used.
inline std::optional<std::pair<int, int>> process_group_size_rank(const c10::IValue& v) {
#ifdef HABITAT_HAS_C10D
  if (!v.isObject()) return std::nullopt;
  const std::string type = v.type()->str();
  if (type.size() < 12 || type.compare(type.size() - 12, 12, "ProcessGroup") != 0) return std::nullopt;
  try {
    const auto group = v.toCustomClass<::c10d::ProcessGroup>();
    return std::make_pair(group->getSize(), group->getRank());
  } catch (const std::exception&) {
    return std::nullopt;
  }
#else
  (void)v;
  return std::nullopt;
#endif
}

}  // namespace habitat::capture::compat
