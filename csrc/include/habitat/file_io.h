// Whole-file reads: the one way the engine and its bindings read a file (traces, device
// databases, learned-model weights and metadata).
#pragma once

#include <string>

namespace habitat {

// The file's bytes. Throws std::system_error (errno inside, EISDIR for a directory) whose
// message reads "cannot read <what> '<path>'", so callers can tell a missing file from a
// corrupt one.
std::string read_file(const std::string& path, const std::string& what);

}  // namespace habitat
