// A small dense network (Linear + ReLU layers, z-normalised input) evaluated without torch,
// loaded from a safetensors file written by python/habitat/learned (see weights/README.md).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace habitat {

// Float32 tensors of a safetensors file: 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and data offsets, then raw little-endian data.
struct SafeTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
struct SafeTensorsFile {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
};
// Throws std::runtime_error naming `path` when the file is missing, truncated or not F32.
SafeTensorsFile read_safetensors(const std::string& path);
SafeTensorsFile parse_safetensors(const std::string& bytes, const std::string& what);

class Mlp {
 public:
  struct Layer {
    int in = 0;
    int out = 0;
    std::vector<float> weight;  // [out][in], row-major
    std::vector<float> bias;    // [out]
    // Each row's first and one-past-last nonzero column: an ensemble is stored as one network
    // whose hidden layers are block-diagonal (8 members of 128: 1/8 of each row is nonzero), and
    // the exact zeros outside the block add nothing to a row's sum.
    std::vector<std::pair<int, int>> nonzero;
  };

  // Tensors "norm.mean", "norm.std", "layers.<i>.weight" [out,in], "layers.<i>.bias" [out]
  // for i in [0, layers). ReLU follows every layer but the last, which has one output.
  static Mlp from_tensors(const SafeTensorsFile& file, int layers, const std::string& what);

  int inputs() const { return static_cast<int>(mean_.size()); }
  // Raw output for a feature vector of inputs() values (normalised here).
  double forward(const std::vector<double>& features) const;

 private:
  std::vector<float> mean_;
  std::vector<float> std_;
  std::vector<Layer> layers_;
};

}  // namespace habitat
