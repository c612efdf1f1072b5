#include "habitat/learned_envelope.h"

#include <algorithm>

#include "predict/op_key.h"

namespace habitat {

DominanceEnvelope::DominanceEnvelope(const ShapeModel& inner, const DeviceDatabase& db)
    : inner_(inner), db_(db), key_(std::make_unique<OpKey>()) {
  for (std::size_t i = 0; i < db_.all().size(); ++i) index_of_.emplace(db_.all()[i].name, i);
}

DominanceEnvelope::~DominanceEnvelope() = default;

std::vector<std::size_t> DominanceEnvelope::dominating(const Device& target, Precision p) const {
  std::vector<std::size_t> out;
  const std::vector<Device>& all = db_.all();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].name != target.name && at_least_as_good(all[i], target, p)) out.push_back(i);
  }
  return out;
}

std::optional<double> DominanceEnvelope::predict_us(const OpRecord& op, const OpCost& cost,
                                                    const Device& target) const {
  // A target outside the database (or one overridden under a database name) is not memoised.
  auto at = index_of_.find(target.name);
  const Device* listed = at == index_of_.end() ? nullptr : &db_.all()[at->second];
  const bool memoised = listed != nullptr && listed == &target;
  const std::size_t index = memoised ? at->second : 0;

  std::string key = key_->of(op);
  const double work[3] = {cost.flops, cost.bytes_read, cost.bytes_written};
  key.append(reinterpret_cast<const char*>(work), sizeof work);
  key.push_back(static_cast<char>(cost.precision));
  auto& row = memo_.try_emplace(std::move(key), db_.all().size()).first->second;
  auto on = [&](std::size_t i) -> std::optional<double> {
    if (!row[i]) row[i] = inner_.predict_us(op, cost, db_.all()[i]);
    return *row[i];
  };

  std::optional<double> best = memoised ? on(index) : inner_.predict_us(op, cost, target);
  if (!best) return best;
  auto max_over = [&](const std::vector<std::size_t>& others) {
    for (std::size_t i : others) {
      if (auto t = on(i)) best = std::max(*best, *t);
    }
  };
  if (memoised) {
    auto [it, inserted] = dominating_.try_emplace({index, cost.precision});
    if (inserted) it->second = dominating(target, cost.precision);
    max_over(it->second);
  } else {
    max_over(dominating(target, cost.precision));
  }
  return best;
}

}  // namespace habitat
