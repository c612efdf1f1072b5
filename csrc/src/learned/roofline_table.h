// Measured rooflines of the ops no learned family covers (weights/roofline.json, fitted by
// python/habitat/learned/roofline_table.py on the recorded Hopper steps): per op name, element
// width and layout, per op name and element width, per op name, and per op class, the fixed
// part and the efficiency of time = fixed_us + roofline / efficiency.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "habitat/op_cost.h"
#include "habitat/predictor.h"
#include "habitat/trace.h"

namespace habitat {

class RooflineTable {
 public:
  // roofline.json in `dir`; an empty table when there is none. Throws std::runtime_error naming
  // the file and the field for a malformed one.
  static RooflineTable load(const std::string& dir);

  bool empty() const { return entries_.empty(); }
  // The most specific entry for the op (roofline_table.py `keys`, then its class).
  std::optional<MeasuredRoofline> find(const OpRecord& op, const OpCost& cost) const;

 private:
  std::map<std::string, MeasuredRoofline>
      entries_;  // "op|bytes|layout", "op|bytes", "op", "class:<c>"
};

}  // namespace habitat
