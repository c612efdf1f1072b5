// An NVTX range named after an op, so Nsight Systems shows each captured op over its kernels.
//
// Header-only NVTX 3 in the "habitat" domain when built with HABITAT_WITH_NVTX; a no-op
// otherwise. Ranges cost per op, so they are pushed only on request (HABITAT_NVTX=1 in the
// environment, or set_nvtx_requested(true): predict_on(nvtx=True)) and only when a tool has
// injected itself into NVTX (Nsight Systems, or CUPTI via NVTX_INJECTION64_PATH): without one
// NVTX discards them anyway. Off, the per-op cost is one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace habitat {
namespace detail {
inline bool nvtx_requested_by_env() {
  const char* v = std::getenv("HABITAT_NVTX");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}
inline std::atomic<bool>& nvtx_requested_flag() {
  static std::atomic<bool> requested{nvtx_requested_by_env()};
  return requested;
}
}  // namespace detail

// Whether NVTX ranges were asked for (HABITAT_NVTX=1 or set_nvtx_requested(true)).
inline bool nvtx_requested() {
  return detail::nvtx_requested_flag().load(std::memory_order_relaxed);
}
inline void set_nvtx_requested(bool on) {
  detail::nvtx_requested_flag().store(on, std::memory_order_relaxed);
}
}  // namespace habitat

#ifdef HABITAT_WITH_NVTX
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#endif

namespace habitat {

#ifdef HABITAT_WITH_NVTX

namespace detail {
inline nvtxDomainHandle_t nvtx_domain() {
  // Checked once: tools attach through this variable before the process starts.
  static const nvtxDomainHandle_t domain =
      std::getenv("NVTX_INJECTION64_PATH") != nullptr ? nvtxDomainCreateA("habitat") : nullptr;
  return domain;
}
}  // namespace detail

inline bool nvtx_enabled() { return nvtx_requested() && detail::nvtx_domain() != nullptr; }

class NvtxRange {
 public:
  // "aten::addmm" or, with a module path, "aten::addmm (encoder.layers.3.attn)".
  explicit NvtxRange(std::string_view op_name, std::string_view module_path = {}) {
    if (!nvtx_requested()) return;
    nvtxDomainHandle_t domain = detail::nvtx_domain();
    if (domain == nullptr) return;
    std::string message(op_name);
    if (!module_path.empty()) {
      message.append(" (").append(module_path).append(")");
    }
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = message.c_str();
    nvtxDomainRangePushEx(domain, &attributes);
    pushed_ = true;  // a tool without push/pop tracking returns a negative level, yet pops
  }
  ~NvtxRange() {
    if (pushed_) nvtxDomainRangePop(detail::nvtx_domain());
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  bool pushed_ = false;
};

#else

inline bool nvtx_enabled() { return false; }

class NvtxRange {
 public:
  explicit NvtxRange(std::string_view, std::string_view = {}) {}
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

#endif

}  // namespace habitat
