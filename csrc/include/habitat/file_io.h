// Whole-file reads: the one way the engine and its bindings read a file (traces, device
// databases, learned-model weights and metadata). Files come from users: only regular files
// are read (a FIFO would block forever, /dev/zero never ends), and no more bytes than the cap
// of habitat/input_limits.h.
#pragma once

#include <cstdint>
#include <string>

#include "habitat/input_limits.h"

namespace habitat {

// The file's bytes. Throws std::system_error (errno inside, EISDIR for a directory) whose
// message reads "cannot read <what> '<path>'", so callers can tell a missing file from a
// corrupt one; InputLimitError (habitat/input_limits.h) for a file that is not a regular
// file or holds more than `max_bytes` (0: input_limits().max_bytes), naming the cap and the
// environment variable that raises it.
std::string read_file(const std::string& path, const std::string& what, uint64_t max_bytes = 0);

// The message of an input refused for its size (`size`: its size when known, else 0):
// "<what> '<path>' holds 3.1 GB, more than the cap on input files (2.7 GB, <basis>): if the
// memory is there, set HABITAT_MAX_INPUT_BYTES=3G to read it".
std::string too_large_message(const std::string& path, const std::string& what, uint64_t cap,
                              const std::string& basis, uint64_t size);

}  // namespace habitat
