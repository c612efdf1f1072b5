#include "habitat/forecast_rows.h"

#include <cstring>

#include "habitat/precision.h"

namespace habitat {
namespace {

class RowWriter {
 public:
  explicit RowWriter(char* at) : at_(at) {}
  template <class T>
  void put(T v) {
    std::memcpy(at_, &v, sizeof v);
    at_ += sizeof v;
  }

 private:
  char* at_;
};

}  // namespace

std::size_t forecast_row_bytes(std::size_t n_targets) {
  return sizeof(uint64_t) + 2 * sizeof(double) + n_targets * (2 * sizeof(double) + 2) + 2;
}

std::string forecast_ops_to_rows(const Forecast& f) {
  const std::size_t n_targets = f.targets.size();
  const std::size_t row = forecast_row_bytes(n_targets);
  std::string out(row * f.ops.size(), '\0');
  for (std::size_t i = 0; i < f.ops.size(); ++i) {
    const OpForecast& of = f.ops[i];
    RowWriter w(out.data() + i * row);
    w.put<uint64_t>(of.op_id);
    w.put<double>(of.cost.flops);
    w.put<double>(of.cost.bytes());
    for (std::size_t t = 0; t < n_targets; ++t) w.put<double>(of.per_target[t].time_us);
    for (std::size_t t = 0; t < n_targets; ++t) w.put<double>(of.share[t].time_us);
    for (std::size_t t = 0; t < n_targets; ++t)
      w.put<uint8_t>(static_cast<uint8_t>(of.per_target[t].method));
    for (std::size_t t = 0; t < n_targets; ++t)
      w.put<uint8_t>(static_cast<uint8_t>(of.share[t].method));
    w.put<uint8_t>(static_cast<uint8_t>(of.cost.op_class));
    w.put<uint8_t>(static_cast<uint8_t>(of.cost.precision));
  }
  return out;
}

std::vector<std::string> method_names() {
  std::vector<std::string> out;
  for (int m = 0; m <= static_cast<int>(Method::Composite); ++m)
    out.emplace_back(to_string(static_cast<Method>(m)));
  return out;
}

std::vector<std::string> op_class_names() {
  std::vector<std::string> out;
  for (int c = 0; c <= static_cast<int>(OpClass::Unknown); ++c)
    out.emplace_back(to_string(static_cast<OpClass>(c)));
  return out;
}

std::vector<std::string> precision_names() {
  std::vector<std::string> out;
  for (int p = 0; p <= static_cast<int>(Precision::Fp64); ++p)
    out.emplace_back(to_string(static_cast<Precision>(p)));
  return out;
}

}  // namespace habitat
