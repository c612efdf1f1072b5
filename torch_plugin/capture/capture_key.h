// The one dispatch key Habitat's capture lives on, and the check that it is usable.
#pragma once

#include <c10/core/DispatchKey.h>

#include <string>

namespace habitat::capture {

// The generic "mode" key: it sits above Autocast, Autograd and the Python key, so a fallback
// on it sees every call that goes through the dispatcher from the top, before any
// decomposition. torch reserves it for tests and may renumber or drop it between releases:
// the name is checked at import (see check_capture_key) and this is the only place naming it.
inline constexpr c10::DispatchKey kCaptureKey = c10::DispatchKey::TESTING_ONLY_GenericMode;
inline constexpr const char* kCaptureKeyName = "TESTING_ONLY_GenericMode";

// Empty when the running torch matches what this extension was built for and the key is
// free for our fallback; otherwise an actionable explanation (the caller raises ImportError).
std::string check_capture_key();

// Registers the boxed fallback on kCaptureKey (once per process). Throws std::runtime_error
// with an actionable message when the key is taken or the registration fails.
void install_fallback();

}  // namespace habitat::capture
