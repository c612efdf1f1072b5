"""One sample of the measured-roofline table (roofline_table.py fits them; the recorded steps and
family_table.py's kernel collections give them): an op's roofline on its GPU against its measured
kernel time, with the keys the engine looks it up by (csrc/src/learned/roofline_table.cpp)."""
from __future__ import annotations

from dataclasses import dataclass

from habitat.learned.devices import DeviceSpec

COLLECTION = "collection"  # the workload of a kernel collection's samples (family_table.py)


@dataclass
class Sample:
    workload: str
    gpu: str
    op: str
    op_class: str
    elem_bytes: int
    channels_last: bool
    roofline_us: float
    kernels: int
    measured_us: float
    # The op's roofline with its bytes at SM_BYTES_PER_CLOCK per SM and clock instead of the DRAM
    # bandwidth (sm_roofline_us): 0 where not computed (an entry fitted on such samples keeps the
    # DRAM bound).
    sm_roofline_us: float = 0.0
    # Looked up before the op's own keys: a depthwise convolution's "k<kernel>s<stride>"
    # (csrc/src/cost/depthwise.h depthwise_variant); "" for the rest.
    variant: str = ""


DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def first_tensor(op: dict) -> dict:
    for a in op.get("args", []):
        if "tensor" in a:
            return a["tensor"]
        if a.get("tensors"):
            return a["tensors"][0]
    return {}


def channels_last(op: dict) -> bool:
    """The op's first tensor is 4-D with unit channel stride (as learned_model.cpp reads it)."""
    t = first_tensor(op)
    strides = t.get("strides") or []
    return len(t.get("shape", [])) == 4 and not t.get("contiguous", True) and len(strides) == 4 and strides[1] == 1


def elem_bytes(op: dict) -> int:
    """The element width of the op's first tensor (OpRecord::first_tensor; 4 if not floating)."""
    return DTYPE_BYTES.get(first_tensor(op).get("dtype", ""), 4)


# The SM-side rate of an "sm"-bound entry: its bytes at this many per SM and clock. Any constant
# serves (an entry's fitted efficiency absorbs it); 32 keeps the rate above every GPU's DRAM
# bandwidth in the database, so the efficiencies stay in (0, 1]. Must equal
# csrc/src/hardware/roofline.h kSmBytesPerClock.
SM_BYTES_PER_CLOCK = 32.0

#: Ops the engine forecasts from their kernels' launch structure, never from the table
#: (csrc/src/predict/embedding_kernels.cpp and loss_kernels.cpp; their constants:
#: benchmarks/accuracy/embedding_kernels_fit.py and loss_kernels_fit.py).
LAUNCH_STRUCTURE_OPS = frozenset({"embedding", "embedding_dense_backward", "index_select", "nll_loss_forward",
                                  "nll_loss_backward"})


def sm_roofline_us(dev: DeviceSpec, precision: str, flops: float, nbytes: float) -> float:
    """The roofline of an op whose memory traffic is bounded on the SM side (issue rate, bytes in
    flight) rather than by DRAM: its FLOPs at its precision's peak or its bytes at
    SM_BYTES_PER_CLOCK per SM and clock, the larger. Measured 2026-11-27: depthwise convolutions
    take the same time on an H100 and an H200 (same SMs and clock, 1.43x the bandwidth)."""
    peak = dev.peak_flops(precision if precision in dev.peak_tflops else "fp32")
    rate = dev.sms * dev.clock_mhz * 1e6 * SM_BYTES_PER_CLOCK
    return max(flops / peak * 1e6, nbytes / rate * 1e6)


def roofline_us(dev: DeviceSpec, precision: str, flops: float, nbytes: float) -> float:
    """An op row's roofline on `dev`, in us: its FLOPs at
    its precision's peak (FP32's where the GPU lists none for it) or its bytes at the DRAM
    bandwidth, the larger."""
    peak = dev.peak_flops(precision if precision in dev.peak_tflops else "fp32")
    return max(flops / peak * 1e6, nbytes / (dev.bandwidth_gbs * 1e3))
