// Physical sanity of the learned forecasts across GPUs. A learned model is a smooth fit, not a
// law: on its own it can forecast a GPU that is better on every figure (an A100 80GB against
// the 40GB) slower for the same op. The envelope forecasts each target as the least of the
// model's forecasts for the target and for every database GPU it is at least as good as
// (at_least_as_good, device.h), so that can no longer happen for any two GPUs of the database:
// if A >= B, every GPU B dominates A dominates too, so A's minimum runs over a superset.
#pragma once

#include <optional>

#include "habitat/device.h"
#include "habitat/predictor.h"

namespace habitat {

class DominanceEnvelope : public ShapeModel {
 public:
  // Both must outlive the envelope (it holds references).
  DominanceEnvelope(const ShapeModel& inner, const DeviceDatabase& db) : inner_(inner), db_(db) {}

  std::optional<double> predict_us(const OpRecord& op, const OpCost& cost,
                                   const Device& target) const override;

 private:
  const ShapeModel& inner_;
  const DeviceDatabase& db_;
};

}  // namespace habitat
