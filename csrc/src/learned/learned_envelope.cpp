#include "habitat/learned_envelope.h"

#include <algorithm>

namespace habitat {

std::optional<double> DominanceEnvelope::predict_us(const OpRecord& op, const OpCost& cost,
                                                    const Device& target) const {
  std::optional<double> best = inner_.predict_us(op, cost, target);
  if (!best) return best;
  for (const Device& other : db_.all()) {
    if (other.name == target.name || !at_least_as_good(target, other, cost.precision)) continue;
    if (auto t = inner_.predict_us(op, cost, other)) best = std::min(*best, *t);
  }
  return best;
}

}  // namespace habitat
