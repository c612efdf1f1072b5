// Bounds on what one input file may cost: every file the engine reads comes from a user and
// may be damaged or hostile (a gzip that inflates to gigabytes, /dev/zero, a trace of a
// million one-op steps, JSON nested a million levels deep). The caps scale with the memory
// available when the file is read, and each can be overridden by an environment variable
// that the message naming the cap gives.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace habitat {

// JSON nesting deeper than any file Habitat writes (a trace nests 8 levels, a device file 4):
// every JSON reader refuses more, so no reader recurses without bound.
inline constexpr int kMaxJsonDepth = 256;

// The cap on files Habitat ships or the user installs as models (the packaged device
// database, learned weights and their metadata): fixed, so that HABITAT_MAX_INPUT_BYTES, a cap
// on what users feed it, never stops Habitat from loading itself.
inline constexpr uint64_t kPackagedFileMaxBytes = uint64_t{1} << 30;

// Bytes a trace's text (decompressed), its ops and its steps may hold.
struct InputLimits {
  uint64_t max_bytes = 0;
  uint64_t max_ops = 0;
  uint64_t max_steps = 0;
  // What set each, for messages: "a share of the 21.5 GB of memory available" or "set by
  // HABITAT_MAX_TRACE_OPS".
  std::string bytes_basis;
  std::string ops_basis;
  std::string steps_basis;
};

// Memory the reader may still use before the machine runs short (MemAvailable on Linux);
// 0 when it cannot be told.
uint64_t available_memory_bytes();

// The caps in force now: HABITAT_MAX_INPUT_BYTES (a size such as 2000000000, 512M or 4G),
// HABITAT_MAX_TRACE_OPS and HABITAT_MAX_TRACE_STEPS override the ones derived from the memory
// available. Throws InputLimitError naming the variable when one is not a positive number.
InputLimits input_limits();

// An input refused before or while it is read: larger than a cap, not a regular file, or a
// limit variable that is not a number. The message names the problem and the fix.
class InputLimitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "1.5 GB", "730 MB", "12 KB": sizes in messages.
std::string format_bytes(uint64_t bytes);

}  // namespace habitat
