// Physical sanity of the learned forecasts across GPUs. A learned model is a smooth fit, not a
// law: on its own it can forecast a GPU that is better on every figure (an A100 80GB against
// the 40GB) slower for the same op. The envelope forecasts each target as the most of the
// model's forecasts for the target and for every database GPU at least as good as it
// (at_least_as_good, device.h), so that can no longer happen for any two GPUs of the database:
// if A >= B, every GPU that is at least as good as A is at least as good as B, so B's maximum
// runs over a superset. The most, not the least over the GPUs the target beats: the model is
// best where it has device-time rows (the H100, the H200), and a forecast that puts a weaker
// GPU ahead of a stronger one is wrong on the weaker, less measured side. The least had pulled
// the H100's small fp32 GEMMs down to unmeasured GPUs' forecasts: held-out linear fp32 11.9 %
// through the engine against the model's own 9.5 %, now 9.5 %.
//
// Cost: a forecast for many targets asks the same op on every target, and the dominating GPUs
// of one target are the targets of others. Each (op, database GPU) forecast is therefore
// computed once per envelope and memoised (keyed by the op's content, as the predictor's own
// memo), and each target's dominating set once per precision. Not thread-safe: use one
// envelope per forecast (ForecastEngine does, habitat/engine.h).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "habitat/device.h"
#include "habitat/predictor.h"

namespace habitat {

class OpKey;

class DominanceEnvelope : public ShapeModel {
 public:
  // Both must outlive the envelope (it holds references).
  DominanceEnvelope(const ShapeModel& inner, const DeviceDatabase& db);
  ~DominanceEnvelope() override;

  std::optional<double> predict_us(const OpRecord& op, const OpCost& cost,
                                   const Device& target) const override;
  // The inner model's: a fixed part plus the roofline over an efficiency is never slower on a
  // GPU that is at least as good on every figure.
  std::optional<MeasuredRoofline> measured_roofline(const OpRecord& op,
                                                    const OpCost& cost) const override {
    return inner_.measured_roofline(op, cost);
  }

 private:
  // Database positions of the GPUs at least as good as `target` for `p` (itself excluded).
  std::vector<std::size_t> dominating(const Device& target, Precision p) const;

  const ShapeModel& inner_;
  const DeviceDatabase& db_;
  std::unordered_map<std::string, std::size_t> index_of_;  // database name -> position
  // dominating for database targets, by (position, precision).
  mutable std::map<std::pair<std::size_t, Precision>, std::vector<std::size_t>> dominating_;
  // Per op (OpKey plus the precision and work of its cost): the inner forecast per database GPU,
  // filled as needed (outer nullopt: not computed yet).
  mutable std::unordered_map<std::string, std::vector<std::optional<std::optional<double>>>> memo_;
  mutable std::unique_ptr<OpKey> key_;
};

}  // namespace habitat
