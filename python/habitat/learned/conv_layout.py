"""Memory layout of a convolution: cuDNN's NCHW <-> NHWC transform kernels.

cuDNN's tensor-core convolution kernels on Hopper read and write NHWC (channels-last) tensors.
Given NCHW tensors, cuDNN either wraps the pass in layout transforms (each input through
`nchwToNhwcKernel`, the output back through `nhwcToNchwKernel`) and runs the tensor-core kernel,
or runs a kernel that reads NCHW directly: FP32 SIMT kernels for fp32 data, GEMM kernels for
some 1x1 convolutions. Which one is the library's choice of the faster, and the H100 collection
of 2026-11-26 (benchmarks/results/kernels/H100-SXM5-80GB-2026-11-26, every NCHW pass of every
shape in fp32, tf32 and bf16, with its transform kernels' CUPTI time) shows it
(`python benchmarks/accuracy/conv_layout.py --collection DIR`):

- 16-bit: 68 of 81 NCHW passes transform; forecasting every one as transforms plus the
  tensor-core pass is 3.7 % off the measured pass (the untransformed 13 are 1x1 passes whose
  GEMM path costs about the same);
- TF32: 44 of 81 transform. The rule of before (both channel counts multiples of 8, read from
  DCGAN's traces) was wrong on 31 of the 72 it said would; taking the faster of the two
  measured alternatives (the FP32 SIMT pass, and the tensor-core pass plus the transforms
  below) names the path cuDNN took on 56 of 68 and is 12.3 % off the measured pass. The engine
  does the same with its forecasts of the two (csrc/src/learned/learned_model.cpp).

Channels-last convolutions never transform. The trainers learn the convolution alone: device
time less the measured transforms, per-call time less the modelled ones where the row's kernels
show transforms (`without_transforms`), and the engine adds them back (`conv_transform_us`).

Transform time of one pass: FIXED_US_PER_PASS plus reading and writing the pass's three tensors
(input, weight, output; each element read and written once) at BANDWIDTH_SHARE of the DRAM
bandwidth, the share per element width: a 4-byte element moves 8 bytes in about 1.35x the time a
2-byte one takes. Fitted by least squares in log time on the 2026-11-26 collection's NCHW passes
that ran transforms (`conv_layout.py --collection`); the recorded DCGAN and ResNet-50 traces
are the check.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from habitat.learned.features import conv_tensor_elements

if TYPE_CHECKING:
    from habitat.learned.devices import DeviceSpec, DeviceTable
    from habitat.learned.neusight import KernelArrays

FIXED_US_PER_PASS = 3.5
# Share of the DRAM bandwidth the transforms reach, by element width in bytes.
BANDWIDTH_SHARE = {2.0: 0.53, 4.0: 0.89}
# Precisions whose NCHW convolutions run on NHWC tensor-core kernels between transforms (TF32:
# when that is faster than the FP32 SIMT pass).
TRANSFORM_PRECISIONS = ("bf16", "fp16", "fp8", "tf32")
# A row's transform-free time is never taken below this share of its measurement.
MIN_REMAINING_SHARE = 0.25


def tensor_elements(shapes: dict[str, np.ndarray]) -> np.ndarray:
    """Elements of the input, weight and output of each conv row (features.SHAPE_COLUMNS conv)."""
    s = {c: np.asarray(shapes[c], dtype=np.float64) for c in ("batch", "cin", "cout", "kernel", "size",
                                                              "stride", "padding")}
    groups = np.asarray(shapes.get("groups", 1.0), dtype=np.float64)
    out = np.floor((s["size"] + 2.0 * s["padding"] - s["kernel"]) / s["stride"]) + 1.0
    return conv_tensor_elements(s["batch"], s["cin"], s["cout"], s["kernel"], s["size"], out, groups)


def bandwidth_share(elem_bytes: np.ndarray) -> np.ndarray:
    """BANDWIDTH_SHARE of each element width (the nearest listed one)."""
    widths = np.array(sorted(BANDWIDTH_SHARE))
    eb = np.asarray(elem_bytes, dtype=np.float64)
    nearest = widths[np.argmin(np.abs(eb[..., None] - widths), axis=-1)]
    return np.vectorize(BANDWIDTH_SHARE.__getitem__)(nearest)


def transform_us(shapes: dict[str, np.ndarray], dev: "DeviceSpec") -> np.ndarray:
    """Time of one pass's layout transforms on `dev` (us), for NCHW tensors on the tensor path."""
    eb = np.asarray(shapes["elem_bytes"], dtype=np.float64)
    nbytes = 2.0 * eb * tensor_elements(shapes)
    return FIXED_US_PER_PASS + nbytes / (bandwidth_share(eb) * dev.bandwidth_gbs * 1e3)


def without_transforms(rows: "KernelArrays", devices: "DeviceTable") -> tuple["KernelArrays", np.ndarray]:
    """`rows` with the modelled transform time taken from each row whose kernels ran transforms
    (`KernelArrays.transformed`: rows timed per call; device times have them taken out already),
    at most 1 - MIN_REMAINING_SHARE of it; and the time taken away per row."""
    t = np.zeros(len(rows))
    for g in sorted(set(rows.device[rows.transformed].tolist())):
        m = rows.transformed & (rows.device == g)
        t[m] = transform_us({c: v[m] for c, v in rows.shapes.items()}, devices.find(g))
    latency = np.maximum(rows.latency_us - t, MIN_REMAINING_SHARE * rows.latency_us)
    return rows.with_(latency_us=latency, transformed=np.zeros(len(rows), dtype=bool)), rows.latency_us - latency


def metadata() -> dict:
    """What the conv model's JSON records about the layout: the engine adds back the transform
    cost it states (learned_model.cpp conv_transform_us), so it is the one the rows lost."""
    return {"trained_on": "the convolution alone: device time less the measured transform kernels, per-call "
                          "time less the modelled ones (habitat.learned.conv_layout.without_transforms)",
            "fixed_us_per_pass": FIXED_US_PER_PASS,
            "bandwidth_share_by_element_bytes": {f"{k:g}": v for k, v in sorted(BANDWIDTH_SHARE.items())},
            "precisions": list(TRANSFORM_PRECISIONS),
            "calibration": "benchmarks/accuracy/conv_layout.py --collection benchmarks/results/kernels/"
                           "H100-SXM5-80GB-2026-11-26: least squares in log time on the NCHW passes that ran "
                           "transforms"}
