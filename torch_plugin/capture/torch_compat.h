// Every difference between the torch releases Habitat builds against (2.4-2.15) is handled
// here, so the capture code reads the same for all of them. Where a feature can be detected
// from the types themselves it is (that also covers releases between the ones CI compiles);
// a difference that cannot be detected is keyed on TORCH_VERSION_MAJOR/MINOR.
#pragma once

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

// c10d's ProcessGroup, for the size and rank of a collective's group. Builds of torch without
// distributed support ship no c10d headers; their collectives cannot run either.
#if __has_include(<torch/csrc/distributed/c10d/ProcessGroup.hpp>)
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define HABITAT_HAS_C10D 1
#endif

namespace habitat::capture::compat {

// The releases supported are python/habitat/_version.py's SUPPORTED_TORCH (setup.py refuses
// to build against an older one).

// The thread-local debug-info slot a capture session lives in. Up to torch 2.12
// c10::DebugInfoKind is an enum of fixed slots, and the one no library code uses is
// TEST_INFO_2; later releases make it a class whose identity is the address of a name, so
// Habitat gets a slot of its own.
template <class Kind = c10::DebugInfoKind>
Kind session_debug_info_kind() {
  if constexpr (std::is_enum_v<Kind>) {
    return Kind::TEST_INFO_2;
  } else {
    static constexpr std::string_view kName = "HABITAT_CAPTURE_SESSION";
    return Kind(&kName);
  }
}

// (size, rank) of a c10d process group passed to a c10d op (c10d::allreduce_ and the like take
// it as a custom-class object); nullopt for any other value. Reads only the group's size and
// this process's rank: the group itself is never used.
inline std::optional<std::pair<int, int>> process_group_size_rank(const c10::IValue& v) {
#ifdef HABITAT_HAS_C10D
  if (!v.isObject()) return std::nullopt;
  const std::string type = v.type()->str();
  if (type.size() < 12 || type.compare(type.size() - 12, 12, "ProcessGroup") != 0)
    return std::nullopt;
  try {
    const auto group = v.toCustomClass<::c10d::ProcessGroup>();
    return std::make_pair(group->getSize(), group->getRank());
  } catch (const std::exception&) {
    return std::nullopt;
  }
#else
  (void)v;
  return std::nullopt;
#endif
}

// The precision switches torch consults when it picks a kernel, read cheaply enough to be
// read at every op (a few flag loads) and compared with the window's first reading.
struct PrecisionState {
  bool matmul_tf32 = false;
  bool cudnn_tf32 = true;
  int8_t matmul_precision = 0;  // 0 highest, 1 high, 2 medium
  int8_t autocast = -1;         // c10::ScalarType autocast casts to; -1 when autocast is off
  bool operator==(const PrecisionState&) const = default;
};

// Since torch 2.9 the switches are also set through fp32_precision (torch.backends.cuda.matmul.
// fp32_precision = "tf32"), and the legacy getters TORCH_CHECK that both APIs agree: they throw
// once a program set the new API only. Capture must never throw into the user's op, so a
// failed read takes `on_conflict`: the legacy state is the default, so a disagreement means the
// new API changed it (matmul: TF32 on; cuDNN: its default, on).
template <class Read>
auto read_switch(Read read, decltype(read()) on_conflict) -> decltype(read()) {
  try {
    return read();
  } catch (const c10::Error&) {
    return on_conflict;
  }
}

// The process-wide switches (TF32, matmul precision) into `s`; autocast is left as it is.
inline void read_global_switches(PrecisionState& s) {
  auto& ctx = at::globalContext();
  s.matmul_tf32 = read_switch([&] { return ctx.allowTF32CuBLAS(); }, true);
  s.cudnn_tf32 = read_switch([&] { return ctx.allowTF32CuDNN(); }, true);
  const auto precision =
      read_switch([&] { return ctx.float32MatmulPrecision(); }, at::Float32MatmulPrecision::HIGH);
  switch (precision) {
    case at::Float32MatmulPrecision::HIGH:
      s.matmul_precision = 1;
      break;
    case at::Float32MatmulPrecision::MEDIUM:
      s.matmul_precision = 2;
      break;
    default:
      s.matmul_precision = 0;
  }
}

// The thread's autocast state into `s` (-1 when off).
inline void read_autocast(PrecisionState& s) {
  s.autocast = -1;
  // CUDA autocast decides a CUDA op's dtype, CPU autocast a CPU op's; a CPU trace of a step
  // written for CUDA autocast runs under CPU autocast. The CUDA region wins when both are on.
  if (at::autocast::is_autocast_enabled(at::kCUDA)) {
    s.autocast = static_cast<int8_t>(at::autocast::get_autocast_dtype(at::kCUDA));
  } else if (at::autocast::is_autocast_enabled(at::kCPU)) {
    s.autocast = static_cast<int8_t>(at::autocast::get_autocast_dtype(at::kCPU));
  }
}

inline PrecisionState precision_state() {
  PrecisionState s;
  read_global_switches(s);
  read_autocast(s);
  return s;
}

}  // namespace habitat::capture::compat
