// The captured work of training steps: plain structs shared by the plugin (which fills
// them) and the engine (which forecasts them). No torch types may appear here.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "habitat/interned_string.h"
#include "habitat/precision.h"
#include "habitat/small_ints.h"

namespace habitat {

// Strings that repeat from op to op are InternedStrings (interned_string.h), and shapes are
// inline small vectors (small_ints.h): a captured step of a million ops is held in memory.
struct TensorMeta {
  Dims shape;
  Dims strides;
  InternedString dtype;   // torch name without the "torch." prefix: "float32", "bfloat16", ...
  InternedString device;  // "cpu", "cuda:0", "meta", ...
  bool contiguous = true;
  bool defined = true;   // false for an undefined (None-like) tensor in a list
  uint64_t storage = 0;  // identifies the underlying storage within a step (0 = unknown)
  int64_t storage_offset = 0;

  int64_t numel() const;
  // numel * element size; 0 when the dtype is unknown.
  int64_t nbytes() const;
};

// One schema argument's value, reduced to what cost models need.
struct ArgValue {
  enum class Kind : uint8_t {
    None,
    Tensor,
    TensorList,
    Int,
    IntList,
    Double,
    Bool,
    BoolList,
    String,
    Other
  };
  Kind kind = Kind::None;
  std::vector<TensorMeta> tensors;  // Tensor: one entry; TensorList: each element
  SmallInts<2> ints;                // Int: one; IntList: each; Bool/BoolList: 0 or 1 each
  double real = 0;                  // Double
  InternedString text;              // String; for Other the type name
};

struct Argument {
  InternedString name;  // schema argument name ("self", "stride", "dim", ...)
  ArgValue value;
};

// A CUDA kernel launched by an op (from CUPTI), with what occupancy needs.
struct KernelLaunch {
  InternedString name;
  int grid[3] = {1, 1, 1};
  int block[3] = {1, 1, 1};
  int registers_per_thread = 0;
  int static_shared_bytes = 0;
  int dynamic_shared_bytes = 0;
  double duration_us = 0;
  uint32_t stream = 0;
  // Timeline fields (format 2, from CUPTI; absent in older traces), on the step's clock (us
  // from the step's start): when the host called the launch API, when the kernel began on
  // the device.
  std::optional<double> launch_us;
  std::optional<double> device_start_us;
  // How long the launch API call took on the host (CUPTI's API record, enter to exit;
  // absent in traces before it was recorded): CUPTI's own cost inside the call included.
  std::optional<double> launch_wall_us;

  int64_t blocks() const { return int64_t{grid[0]} * grid[1] * grid[2]; }
  int threads_per_block() const { return block[0] * block[1] * block[2]; }
  int shared_bytes() const { return static_shared_bytes + dynamic_shared_bytes; }
};

// Device work CUPTI records apart from kernels, named as torch.profiler names it: a copy within
// one GPU's memory (cudaMemcpyAsync device to device, which ATen's copy_ of two contiguous
// tensors of one dtype calls: a clone) and a memset. Neither has a launch configuration; both
// are bound by memory bandwidth.
inline constexpr std::string_view kDeviceCopyName = "Memcpy DtoD (Device -> Device)";
inline constexpr std::string_view kDeviceMemsetName = "Memset (Device)";
inline bool is_memory_operation(std::string_view kernel_name) {
  return kernel_name == kDeviceCopyName || kernel_name == kDeviceMemsetName;
}

enum class Phase : uint8_t { Forward, Backward, Optimizer, Other };
const char* to_string(Phase p);
std::optional<Phase> phase_from_string(const std::string& s);

struct OpRecord {
  uint64_t id = 0;                 // unique within its step, in start order
  std::optional<uint64_t> parent;  // id of the op that called this one (composite ops)
  int depth = 0;                   // 0 for ops called by user code or autograd directly
  bool has_children = false;       // some op names this one as parent: its work is theirs
  Phase phase = Phase::Other;
  InternedString name;         // "aten::addmm"
  InternedString overload;     // "out", "Tensor", "" for the default overload
  std::vector<Argument> args;  // every schema argument, in schema order
  std::vector<TensorMeta> outputs;
  InternedString module_path;    // "encoder.layers.3.attn" for forward ops
  InternedString autograd_node;  // "AddmmBackward0" for backward ops
  uint64_t thread = 0;           // small per-step thread number
  double start_us = 0;           // from the step's start
  double wall_us = 0;            // measured inclusive wall time on the origin
  // Habitat's own host time spent recording this op, outside [start_us, start_us + wall_us]
  // but inside its parent's window (format 2; absent when not measured). The timeline model
  // removes it to recover the cadence of the step without Habitat.
  std::optional<double> overhead_us;
  // Habitat's own host time on this op's thread since the previous op recorded there took
  // its record, in no op's overhead_us: Python module hooks, the previous record's commit
  // (absent in traces before it was recorded). Spent before start_us; the timeline removes it.
  std::optional<double> own_before_us;
  std::vector<KernelLaunch> kernels;
  // The precision switches in force when the op ran, where they differed from the trace
  // origin's (e.g. the ops inside an autocast region of a step that began outside it).
  std::optional<PrecisionFlags> precision;

  // Convenience lookups by schema argument name.
  const ArgValue* arg(const std::string& arg_name) const;
  const TensorMeta* tensor(const std::string& arg_name) const;
  // The first tensor argument, whatever its name.
  const TensorMeta* first_tensor() const;
};

// A host call that waits for the device (or one stream waiting for another), from CUPTI's
// runtime API records (format 2).
struct SyncRecord {
  enum class Kind {
    Stream,      // cudaStreamSynchronize: the host waits for `stream`
    Device,      // cudaDeviceSynchronize: the host waits for every stream
    Event,       // cudaEventSynchronize on an event recorded on `stream`
    Memcpy,      // a blocking device-to-host copy on `stream` (.item(), .cpu())
    StreamWait,  // cudaStreamWaitEvent: `stream` waits on device for `wait_stream`'s work
  };
  Kind kind = Kind::Device;
  double start_us = 0;  // host time of the call (step clock)
  double wall_us = 0;   // how long the call blocked the host on the origin
  uint32_t stream = 0;
  uint32_t wait_stream = 0;  // StreamWait only
};
const char* to_string(SyncRecord::Kind k);
std::optional<SyncRecord::Kind> sync_kind_from_string(const std::string& s);

struct Step {
  int64_t index = 0;
  double wall_ms = 0;               // measured wall time of the whole step on the origin
  int64_t measured_peak_bytes = 0;  // allocator peak during the step on a GPU origin (0 = unknown)
  int64_t dropped_ops = 0;          // ops not recorded because the step hit its record cap
  std::vector<OpRecord> ops;
  // Timeline fields (format 2): host synchronisations seen during the step, in host order,
  // and Habitat's per-step host time outside any op (module hooks), when measured.
  std::vector<SyncRecord> syncs;
  std::optional<double> hook_overhead_us;
  // CUPTI's host time per kernel launch on the origin host, measured when tracing started
  // (a launch loop timed with and without CUPTI's activity records); absent when not measured.
  std::optional<double> launch_overhead_us;
  // The wall time of an uninstrumented step of the same program that the live run calibrated
  // this step's host cadence to (predict_on: the median of its steady-state steps), so a saved
  // trace forecasts as the live run did; absent when there was none.
  std::optional<double> uninstrumented_wall_ms;
};

struct TraceOrigin {
  std::string device = "cpu";  // database name / torch device name of the GPU, or "cpu"
  std::string host;            // free text: CPU model or hostname
  std::string torch_version;
  std::string habitat_version;
  bool allow_tf32 = false;  // torch.backends.cuda.matmul.allow_tf32 during capture
  bool autocast = false;
  // Since format version 2 (absent in version 1 traces, which load with torch's defaults):
  bool cudnn_allow_tf32 = true;  // torch.backends.cudnn.allow_tf32 (default True)
  std::string float32_matmul_precision = "highest";  // torch.get_float32_matmul_precision()
  std::string autocast_dtype;  // the autocast dtype when autocast was on ("bfloat16", ...)

  // The switches as one value: what an op without its own `precision` ran under.
  PrecisionFlags precision() const;
};

// The switches an op ran under: its own where recorded, else its trace origin's.
PrecisionFlags op_precision(const OpRecord& op, const TraceOrigin& origin);

struct Trace {
  static constexpr const char* kFormatName = "habitat-trace";
  static constexpr int kFormatVersion =
      2;  // 2: timeline fields, per-op precision switches (optional)
  TraceOrigin origin;
  std::vector<Step> steps;
};

class TraceFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Versioned JSON document ("format": "habitat-trace", "version": 2; version 1 still loads). Loading
// validates every field and throws TraceFormatError naming the problem (corrupt, missing field,
// newer version than this build understands).
std::string trace_to_json(const Trace& trace);
// A view: a caller holding the document elsewhere (a Python str) lends it without a copy.
Trace trace_from_json(std::string_view text);
void save_trace(const Trace& trace, const std::string& path);
Trace load_trace(const std::string& path);

}  // namespace habitat
