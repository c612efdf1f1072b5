// Numbers in the timeline's notes, written with a fixed number of decimals.
#pragma once

#include <cstdio>
#include <string>

namespace habitat {

inline std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace habitat
