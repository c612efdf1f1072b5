// The learned efficiency models behind load_learned_models (learned_model.h): one MLP per
// op family, and the mapping from an aten op's shapes to a family's canonical shape.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "habitat/learned_features.h"
#include "learned/mlp.h"
#include "habitat/predictor.h"

namespace habitat {

struct FamilyModel {
  Mlp mlp;
  double e_max = 1.0;  // efficiency = e_max * sigmoid(mlp output)
  // Smallest device time of one kernel (the metadata's launch_floor_us; 0 in older files):
  // the models are trained floor-free, so a tiny op is not forecast below a real launch.
  double launch_floor_us = 0.0;
};

// One family-level piece of an op's work: the op's time is the sum of its parts' times.
struct LearnedPart {
  LearnedFamily family;
  LearnedShape shape;
  double scale = 1.0;  // e.g. 2 for a convolution_backward computing two gradients
};

// Splits an op into family parts; empty when no learned family covers it (or shapes are
// missing). `attention_model`: a fused attention op is one attention part (else two GEMMs).
std::vector<LearnedPart> learned_parts(const OpRecord& op, const OpCost& cost, bool attention_model = false);

class LearnedModels : public ShapeModel {
 public:
  // Reads <family>.safetensors + <family>.json for each family present in `dir`.
  static LearnedModels load(const std::string& dir);

  bool empty() const { return models_.empty(); }
  bool has(LearnedFamily f) const { return models_.count(f) != 0; }
  std::vector<std::string> families() const;

  // Time of one canonical shape on `device`; nullopt when the family has no model.
  std::optional<double> predict_family_us(LearnedFamily f, const LearnedShape& shape,
                                          const Device& device, Precision precision) const;

  std::optional<double> predict_us(const OpRecord& op, const OpCost& cost,
                                   const Device& target) const override;

 private:
  std::map<LearnedFamily, FamilyModel> models_;
};

}  // namespace habitat
