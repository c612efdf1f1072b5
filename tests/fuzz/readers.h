// What the fuzz targets run on each input (tests/fuzz/README.md): the engine's trace reader
// and device reader, with the invariants every input must keep. A reader may refuse an input
// only with its own error (TraceFormatError, InputLimitError, the device database's
// std::runtime_error); anything else (a crash, another exception, a broken round trip)
// aborts, which libFuzzer reports with the input. Shared by the libFuzzer targets and the
// corpus replay in the default test build (tests/cpp/fuzz/test_fuzz_corpus.cpp).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "habitat/device.h"
#include "habitat/input_limits.h"
#include "habitat/trace.h"

namespace habitat::fuzz {

[[noreturn]] inline void broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

// A trace that decodes encodes to a document that decodes to the same encoding.
inline void trace_reader(std::string_view text) {
  std::string encoded;
  try {
    encoded = trace_to_json(trace_from_json(text));
  } catch (const TraceFormatError&) {
    return;
  } catch (const InputLimitError&) {
    return;
  }
  try {
    const std::string again = trace_to_json(trace_from_json(encoded));
    if (again != encoded) broken("trace round trip", encoded.substr(0, 200));
  } catch (const std::exception& e) {
    broken("a trace Habitat wrote does not read back", e.what());
  }
}

// A device document merges into the packaged database or is refused whole, and every device
// it leaves is found by its own name.
inline void device_reader(std::string_view text, const DeviceDatabase& packaged) {
  DeviceDatabase db = packaged;
  try {
    db.merge_json(text);
  } catch (const std::runtime_error&) {  // the database's own errors (and InputLimitError)
    return;
  }
  for (const Device& d : db.all()) {
    if (db.try_find(d.name) != &d) broken("device lookup", d.name);
    if (!(d.memory_bandwidth_gbs > 0) || !(d.peak_flops(Precision::Fp32Simt) > 0)) {
      broken("device figures", d.name);
    }
  }
}

}  // namespace habitat::fuzz
