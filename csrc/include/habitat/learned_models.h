// The learned efficiency models behind load_learned_models (learned_model.h): one MLP per
// op family, and the mapping from an aten op's shapes to a family's canonical shape.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "habitat/learned_features.h"
#include "habitat/predictor.h"
#include "learned/mlp.h"

namespace habitat {

struct FamilyModel {
  Mlp mlp;
  double e_max = 1.0;  // efficiency = e_max * sigmoid(mlp output)
  // Smallest device time of one kernel (the metadata's launch_floor_us; 0 in older files):
  // the models are trained floor-free, so a tiny op is not forecast below a real launch.
  double launch_floor_us = 0.0;
  // Positions in feature_names(family) of the features this model reads, in its order; empty
  // when it reads them all (the FP32 SIMT models read the features they were trained with).
  std::vector<std::size_t> columns;
  // An FP32 SIMT model serves only shapes whose roofline is at least this (metadata
  // from_roofline_us; 0 if absent), the main model the rest.
  double from_roofline_us = 0.0;
  // Trained on convolution times without cuDNN's NCHW <-> NHWC transforms (metadata
  // "nchw_transforms", which also holds the transform cost the trainer took out): the engine
  // adds that cost back for NCHW convolutions in those precisions (conv_transform_us).
  struct NchwTransforms {
    double fixed_us_per_transform = 0;
    double transforms_per_pass = 0;
    double bandwidth_share = 1;  // of the target's DRAM bandwidth, reading and writing each tensor
    // Bytes each element is counted at (metadata "element_bytes"); absent in older files: the
    // tensor's own element size.
    std::optional<double> element_bytes;
    std::vector<Precision> precisions;
  };
  std::optional<NchwTransforms> nchw_transforms;
  // The smallest trained value of each shape column (metadata "shape_extent"; empty in older
  // files): a shape below it in any column is declined (the caller falls back to the roofline),
  // since clamping each feature alone still leaves the combination unseen.
  std::map<std::string, double> smallest_trained;
  bool covers(const LearnedShape& shape) const;
};

// One family-level piece of an op's work: the op's time is the sum of its parts' times.
struct LearnedPart {
  LearnedFamily family;
  LearnedShape shape;
  double scale = 1.0;  // e.g. 2 for a convolution_backward computing two gradients
};

// Splits an op into family parts; empty when no learned family covers it (or shapes are
// missing). `attention_model`: a fused attention op is one attention part (else two GEMMs).
std::vector<LearnedPart> learned_parts(const OpRecord& op, const OpCost& cost,
                                       bool attention_model = false);

// The precision a part is forecast in: an op's matrix parts in its own precision (tensor-core
// paths; an NCHW TF32 convolution with unaligned channels as the FP32 work cuDNN runs), its
// softmax and every memory-bound family as FP32 SIMT work.
Precision learned_part_precision(const OpCost& cost, const LearnedPart& part);

// Which model serves an op: `<family>` (precision-aware, trained on NeuSight FP32 plus the
// H100 tensor-core kernels) for tensor-core precisions and for families without an FP32 model;
// `<family>_fp32` (trained on NeuSight FP32 SIMT kernels only, without precision features)
// for FP32 SIMT work when present, because on NeuSight's FP32 data it forecasts GPUs it never
// saw better than the precision-aware model (weights/README.md, "Which model serves what").
class LearnedModels : public ShapeModel {
 public:
  // Reads <family>.safetensors + <family>.json, and <family>_fp32.*, for each family in `dir`.
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
  std::map<LearnedFamily, FamilyModel> fp32_models_;  // FP32 SIMT only
};

}  // namespace habitat
