// libFuzzer target: the trace reader (tests/fuzz/readers.h). Built with -DHABITAT_FUZZ=ON
// and clang; run by .ci/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  habitat::fuzz::trace_reader(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
