// An NVTX range named after an op, so Nsight Systems shows each captured op over its kernels.
//
// Header-only NVTX 3 in the "habitat" domain when built with HABITAT_WITH_NVTX; a no-op
// otherwise. Ranges are pushed only when a tool has injected itself into NVTX (Nsight
// Systems, or CUPTI via NVTX_INJECTION64_PATH): without one NVTX discards them anyway, and
// skipping the name formatting keeps the per-op cost at one branch.
#pragma once

#include <string>
#include <string_view>

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

inline bool nvtx_enabled() { return detail::nvtx_domain() != nullptr; }

class NvtxRange {
 public:
  // "aten::addmm" or, with a module path, "aten::addmm (encoder.layers.3.attn)".
  explicit NvtxRange(std::string_view op_name, std::string_view module_path = {}) {
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
