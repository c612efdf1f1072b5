#include "learned/roofline_table.h"

#include <filesystem>
#include <stdexcept>
#include <vector>

#include "cost/depthwise.h"
#include "habitat/file_io.h"
#include "trace/json_reader.h"

namespace habitat {
namespace {

// The element width and layout key parts of an op, as roofline_table.py computes them from a
// trace: the first tensor's dtype width (4 when it is not a floating type), "cl" when that
// tensor is 4-D with unit channel stride.
std::pair<std::string, std::string> width_and_layout(const OpRecord& op) {
  const TensorMeta* t = op.first_tensor();
  if (t == nullptr) return {"4", ""};
  const std::string dtype(t->dtype);
  const char* width = dtype == "float16" || dtype == "bfloat16" ? "2"
                      : dtype == "float64"                      ? "8"
                                                                : "4";
  const bool cl =
      !t->contiguous && t->shape.size() == 4 && t->strides.size() == 4 && t->strides[1] == 1;
  return {width, cl ? "cl" : ""};
}

// The name an op is looked up by: its aten name, except a depthwise convolution
// (cost/depthwise.h), which runs depthwise kernels whatever it is called (mkldnn_convolution in
// a CPU trace; cudnn_convolution or _conv_depthwise2d on CUDA): one name for its forward and one
// for its backward, as family_table.py `table_name` fits them.
std::string table_name(const OpRecord& op, const OpCost& cost) {
  std::string name(op.name);
  if (name.starts_with("aten::")) name.erase(0, 6);
  if (cost.op_class != OpClass::Conv || !op_cost::is_depthwise_conv(op)) return name;
  return name.ends_with("_backward") ? "depthwise_conv2d_backward" : "depthwise_conv2d";
}

MeasuredRoofline read_entry(const json_reader::json& v, const json_reader::Loc& l) {
  using namespace json_reader;
  expect_object(v, l);
  MeasuredRoofline m;
  m.fixed_us = read_duration(required(v, l, "fixed_us"), l.child("fixed_us"));
  m.efficiency = read_real(required(v, l, "efficiency"), l.child("efficiency"));
  if (!(m.efficiency > 0 && m.efficiency <= 1)) {
    throw DecodeError{l.child("efficiency").str() + ": must be in (0, 1]"};
  }
  optional(v, l, "bound", [&m](const json& b, const Loc& at) {
    const std::string bound = read_string(b, at);
    if (bound != "sm" && bound != "dram")
      throw DecodeError{at.str() + ": must be \"sm\" or \"dram\""};
    m.sm_bound = bound == "sm";
  });
  return m;
}

}  // namespace

RooflineTable RooflineTable::load(const std::string& dir) {
  RooflineTable table;
  const std::filesystem::path path = std::filesystem::path(dir) / "roofline.json";
  if (!std::filesystem::is_regular_file(path)) return table;
  try {
    using namespace json_reader;
    const json doc = parse(read_file(path.string(), "measured roofline table"));
    const Loc root;
    expect_object(doc, root);
    const Loc ops_at = root.child("ops");
    for (const auto& [key, v] : expect_object(required(doc, root, "ops"), ops_at).items()) {
      table.entries_[key] = read_entry(v, ops_at.child(key));
    }
    const Loc classes_at = root.child("classes");
    for (const auto& [key, v] : expect_object(required(doc, root, "classes"), classes_at).items()) {
      table.entries_["class:" + key] = read_entry(v, classes_at.child(key));
    }
  } catch (const json_reader::DecodeError& e) {
    throw std::runtime_error(path.string() + ": " + e.message +
                             " (rewrite it with python -m habitat.learned.roofline_table)");
  }
  return table;
}

std::optional<MeasuredRoofline> RooflineTable::find(const OpRecord& op, const OpCost& cost) const {
  if (entries_.empty()) return std::nullopt;
  const std::string name = table_name(op, cost);
  const auto [width, layout] = width_and_layout(op);
  std::vector<std::string> keys;
  // A depthwise convolution's filter size and stride first (roofline_table.py `keys`).
  if (cost.op_class == OpClass::Conv && op_cost::is_depthwise_conv(op)) {
    const std::string variant = name + ":" + op_cost::depthwise_variant(op);
    keys = {variant + "|" + width + "|" + layout, variant + "|" + width, variant};
  }
  for (std::string key : {name + "|" + width + "|" + layout, name + "|" + width, name,
                          "class:" + std::string(to_string(cost.op_class))}) {
    keys.push_back(std::move(key));
  }
  for (const std::string& key : keys) {
    if (auto it = entries_.find(key); it != entries_.end()) return it->second;
  }
  return std::nullopt;
}

}  // namespace habitat
