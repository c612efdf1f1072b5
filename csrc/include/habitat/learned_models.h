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
#include "learned/roofline_table.h"

namespace habitat {

struct FamilyModel {
  Mlp mlp;
  double e_max = 1.0;  // efficiency = e_max * sigmoid(mlp output)
  // Smallest device time of one kernel (the metadata's launch_floor_us; 0 in older files):
  // the models are trained floor-free, so a tiny op is not forecast below a real launch.
  double launch_floor_us = 0.0;
  // Positions in feature_names(family) of the features this model reads, in its order; empty
  // when it reads them all.
  std::vector<std::size_t> columns;
  // Trained on convolution times without cuDNN's NCHW <-> NHWC transforms (metadata
  // "nchw_transforms", which also holds the transform cost the trainer took out): the engine
  // adds that cost back for NCHW convolutions on tensor cores in those precisions
  // (conv_transform_us).
  struct NchwTransforms {
    double fixed_us_per_pass = 0;
    // Share of the target's DRAM bandwidth the transforms reach reading and writing each tensor,
    // by element width in bytes.
    std::map<double, double> bandwidth_share_by_element_bytes;
    std::vector<Precision> precisions;
  };
  std::optional<NchwTransforms> nchw_transforms;
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

// The precision a part is forecast in: an op's matrix parts in its own precision, its softmax
// and every memory-bound family as FP32 SIMT work. A TF32 GEMM or convolution is also forecast
// as FP32 SIMT work and the faster of the two taken (LearnedModels::predict_us): cuBLAS and
// cuDNN run FP32 SIMT kernels where those are faster (python/habitat/learned/kernel_paths.py).
Precision learned_part_precision(const OpCost& cost, const LearnedPart& part);

// One model per family, every precision in it (trained on NeuSight's FP32 rows, the H100 kernel
// collections and the recorded Hopper steps: weights/README.md).
class LearnedModels : public ShapeModel {
 public:
  // Reads <family>.safetensors + <family>.json for each family in `dir`, and roofline.json.
  static LearnedModels load(const std::string& dir);

  bool empty() const { return models_.empty(); }
  bool has(LearnedFamily f) const { return models_.count(f) != 0; }
  std::vector<std::string> families() const;

  // Time of one canonical shape on `device`; nullopt when the family has no model.
  std::optional<double> predict_family_us(LearnedFamily f, const LearnedShape& shape,
                                          const Device& device, Precision precision) const;

  std::optional<double> predict_us(const OpRecord& op, const OpCost& cost,
                                   const Device& target) const override;
  // The weights folder's roofline.json entry for an op (roofline_table.h).
  std::optional<MeasuredRoofline> measured_roofline(const OpRecord& op,
                                                    const OpCost& cost) const override;

 private:
  // One part's time in `precision`, with the layout transforms of an NCHW convolution on
  // tensor cores; nullopt when the family has no model for the shape.
  std::optional<double> part_us(const LearnedPart& part, const Device& target,
                                Precision precision) const;
  // An NCHW 1x1 stride-1 convolution pass as the GEMM cuDNN runs it on the NCHW tensors (no
  // layout transforms); nullopt for other passes or without a GEMM model.
  std::optional<double> nchw_pointwise_gemm_us(const LearnedShape& conv, const Device& target,
                                               Precision precision) const;
  // A 16-bit NCHW 2-D forward convolution pass on cuDNN's SIMT kernels (no layout
  // transforms), as the FP32 pass of the same problem; nullopt for other passes.
  std::optional<double> nchw_simt_forward_us(const LearnedShape& conv, const Device& target,
                                             Precision precision) const;

  std::map<LearnedFamily, FamilyModel> models_;
  RooflineTable roofline_table_;
};

}  // namespace habitat
