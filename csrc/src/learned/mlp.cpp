#include "learned/mlp.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "habitat/file_io.h"
#include "trace/json_reader.h"

namespace habitat {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; add byte swapping for this platform");

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  throw std::runtime_error(what + ": " + why);
}

}  // namespace

SafeTensorsFile parse_safetensors(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 8) fail(what, "too short to be a safetensors file");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_len > bytes.size() - 8) fail(what, "header length runs past the end of the file");
  const size_t data_begin = 8 + header_len;
  const size_t data_size = bytes.size() - data_begin;
  SafeTensorsFile file;
  using namespace json_reader;
  try {
    json header;
    try {
      header = parse(std::string_view(bytes).substr(8, header_len));
    } catch (const DecodeError& e) {
      fail(what, "corrupt header: " + e.message);
    }
    const Loc root;
    expect_object(header, root);
    for (const auto& [name, info] : header.items()) {
      const Loc at = root.child(name);
      expect_object(info, at);
      if (name == "__metadata__") {
        for (const auto& [k, v] : info.items()) {
          if (v.is_string()) file.metadata[k] = v.get<std::string>();
        }
        continue;
      }
      if (read_string(required(info, at, "dtype"), at.child("dtype")) != "F32") {
        fail(at.child("dtype"), "must be \"F32\"");
      }
      SafeTensor t;
      t.shape = read_ints(required(info, at, "shape"), at.child("shape"), true);
      const auto offsets =
          read_ints(required(info, at, "data_offsets"), at.child("data_offsets"), true);
      int64_t count = 1;
      for (int64_t d : t.shape) count *= d;
      if (offsets.size() != 2 || offsets[1] < offsets[0] ||
          static_cast<uint64_t>(offsets[1]) > data_size ||
          static_cast<uint64_t>(offsets[1] - offsets[0]) !=
              static_cast<uint64_t>(count) * sizeof(float)) {
        fail(at.child("data_offsets"), "inconsistent with the shape and the file size");
      }
      t.data.resize(static_cast<size_t>(count));
      std::memcpy(t.data.data(), bytes.data() + data_begin + offsets[0], count * sizeof(float));
      file.tensors.emplace(name, std::move(t));
    }
  } catch (const DecodeError& e) {
    fail(what, e.message);
  }
  return file;
}

SafeTensorsFile read_safetensors(const std::string& path) {
  return parse_safetensors(read_file(path, "learned-model weights", kPackagedFileMaxBytes), path);
}

Mlp Mlp::from_tensors(const SafeTensorsFile& file, int layers, const std::string& what) {
  auto get = [&](const std::string& name) -> const SafeTensor& {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) fail(what, "missing tensor " + name);
    return it->second;
  };
  Mlp mlp;
  mlp.mean_ = get("norm.mean").data;
  mlp.std_ = get("norm.std").data;
  if (mlp.mean_.empty() || mlp.std_.size() != mlp.mean_.size())
    fail(what, "norm.mean/norm.std sizes differ");
  if (layers < 1) fail(what, "needs at least one layer");
  int width = static_cast<int>(mlp.mean_.size());
  for (int i = 0; i < layers; ++i) {
    const std::string prefix = "layers." + std::to_string(i);
    const SafeTensor& w = get(prefix + ".weight");
    const SafeTensor& b = get(prefix + ".bias");
    if (w.shape.size() != 2 || w.shape[1] != width || b.shape.size() != 1 ||
        b.shape[0] != w.shape[0]) {
      fail(what, prefix + " has shape inconsistent with its input width " + std::to_string(width));
    }
    Layer layer{width, static_cast<int>(w.shape[0]), w.data, b.data, {}};
    for (int o = 0; o < layer.out; ++o) {
      const float* row = layer.weight.data() + static_cast<size_t>(o) * layer.in;
      int lo = 0, hi = layer.in;
      while (lo < hi && row[lo] == 0.0f) ++lo;
      while (hi > lo && row[hi - 1] == 0.0f) --hi;
      layer.nonzero.emplace_back(lo, hi);
    }
    width = layer.out;
    mlp.layers_.push_back(std::move(layer));
  }
  if (width != 1) fail(what, "the last layer must have one output");
  return mlp;
}

double Mlp::forward(const std::vector<double>& features) const {
  if (features.size() != mean_.size()) {
    throw std::invalid_argument("Mlp::forward: expected " + std::to_string(mean_.size()) +
                                " features, got " + std::to_string(features.size()));
  }
  // Same arithmetic as the numpy reference: normalise in double, then float32 layers.
  std::vector<float> h(features.size());
  for (size_t i = 0; i < h.size(); ++i) {
    h[i] = static_cast<float>((features[i] - static_cast<double>(mean_[i])) /
                              static_cast<double>(std_[i]));
  }
  std::vector<float> next;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    next.assign(layer.out, 0.0f);
    for (int o = 0; o < layer.out; ++o) {
      const float* row = layer.weight.data() + static_cast<size_t>(o) * layer.in;
      const auto [lo, hi] = layer.nonzero[static_cast<size_t>(o)];
      float acc = 0.0f;
      for (int i = lo; i < hi; ++i) acc += row[i] * h[i];
      acc += layer.bias[o];
      next[o] = (l + 1 < layers_.size()) ? std::max(acc, 0.0f) : acc;
    }
    h.swap(next);
  }
  return static_cast<double>(h[0]);
}

}  // namespace habitat
