// Every difference between the torch releases Habitat builds against (2.4-2.15) is handled
// here, so the capture code reads the same for all of them. Where a feature can be detected
// from the types themselves it is (that also covers releases between the ones CI compiles);
// a difference that cannot be detected is keyed on TORCH_VERSION_MAJOR/MINOR.
#pragma once

#include <c10/util/ThreadLocalDebugInfo.h>

#include <string_view>
#include <type_traits>

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

}  // namespace habitat::capture::compat
