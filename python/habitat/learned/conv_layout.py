"""Memory layout of a convolution: cuDNN's NCHW <-> NHWC transform kernels.

cuDNN's tensor-core convolution kernels on Hopper read and write NHWC (channels-last) tensors.
Given NCHW tensors in a 16-bit precision, cuDNN wraps every pass in layout transforms: each of
the pass's two inputs goes through `nchwToNhwcKernel` (or `tensorTransformGeneric`) and its
output back through `nhwcToNchwKernel`. The recorded Hopper traces show it on every NCHW bf16
convolution pass (DCGAN: 3 transform kernels in each of its 57 passes, 44-48 % of its
convolution kernel time) and on none of the channels-last ones (ResNet-50, bf16 and fp32: 0).
With TF32 (fp32 convolutions, cuDNN's default) cuDNN transforms in some passes only (DCGAN: 27
of 40 ops, 113 of the 171 kernels three per pass would give, 13-31 % of the conv kernel time):
the layers with 1 or 3 channels and the 1x1-input transposed convolution (100 channels) run
NCHW FP32 kernels (`sm80_xmma_*_f32f32_f32f32_*_nchw*`, `wgrad_alg0_engine`, `dgrad_engine`),
the others NHWC TF32 kernels between transforms. The rule the engine applies
(`tf32_on_tensor_cores`; learned_model.cpp `learned_part_precision`): an NCHW TF32 pass is a
tensor-core pass with transforms when both channel counts are multiples of 8, otherwise FP32
work without transforms. It holds for 37 of the 40 ops of the H100 and of the H200 trace (the
exception: the 512 -> 1 channel forward convolution, 3 ops, transforms and runs TF32). Read from
the DCGAN traces, which are also rows of the kernel-sum benchmark: they do not test it
independently. Channels-last convolutions never transform; FP32 SIMT kernels read NCHW.
`python benchmarks/accuracy/conv_layout.py` prints these counts from the traces.

The H100 conv collection (benchmarks/gpu/collect_kernels.py) ran NCHW tensors, so its bf16
rows are "transforms + convolution". The conv model is trained on those rows less the transform
time below (`without_transforms`), and the engine adds the transforms back for NCHW 16-bit
convolutions, not for channels-last ones (csrc/src/learned/learned_model.cpp,
conv_transform_us: the same formula, with the constants read from the model's metadata).

Transform time of one pass: `TRANSFORMS_PER_PASS` kernels of `FIXED_US` each, plus reading and
writing the three tensors (input, weight, output: every pass touches each once), each element
counted at `ELEMENT_BYTES` whatever its dtype, at `BANDWIDTH_SHARE` of the GPU's DRAM bandwidth.
Per element, not per byte: the fp32 (TF32) transforms of the DCGAN traces take about as long
as the bf16 ones of the same layers (e.g. 27 against 23 us for the 64 -> 128 channel forward
pass, H100); counted by bytes they were forecast 31 % over in sum (38 % per op, H100), per
element 11 % under (14 % per op), the bf16 forecasts unchanged. That form was chosen on the
fp32 DCGAN traces, which the kernel-sum benchmark also scores. The two constants were fitted
by least squares in log time to the per-op transform kernel sums of one trace set, the H100
run of 2026-11-22, DCGAN, bf16 (40 ops: `benchmarks/accuracy/conv_layout.py`; per-op mean
error 24 %, the sum 3 % under); on the H200 run, not fitted, the sum comes out 14 % under (per
op 19 %).
"""
from __future__ import annotations

import numpy as np

from habitat.learned.devices import DeviceSpec, DeviceTable
from habitat.learned.neusight import KernelArrays

FIXED_US = 3.9
BANDWIDTH_SHARE = 0.88
ELEMENT_BYTES = 2.0
TRANSFORMS_PER_PASS = 3
# Precisions whose NCHW convolutions cuDNN runs on NHWC tensor-core kernels between transforms
# (TF32 only with aligned channels: tf32_on_tensor_cores).
TRANSFORM_PRECISIONS = ("bf16", "fp16", "fp8", "tf32")
# TF32 NCHW convolutions run on tensor cores when both channel counts are multiples of this.
TF32_CHANNEL_MULTIPLE = 8
# A row's transform-free time is never taken below this share of its measurement.
MIN_REMAINING_SHARE = 0.25


def tensor_elements(shapes: dict[str, np.ndarray]) -> np.ndarray:
    """Elements of the input, weight and output of each conv row (features.SHAPE_COLUMNS conv)."""
    s = {c: np.asarray(shapes[c], dtype=np.float64) for c in ("batch", "cin", "cout", "kernel", "size",
                                                              "stride", "padding")}
    out = np.floor((s["size"] + 2.0 * s["padding"] - s["kernel"]) / s["stride"]) + 1.0
    return (s["batch"] * s["cin"] * s["size"] ** 2 + s["cout"] * s["cin"] * s["kernel"] ** 2
            + s["batch"] * s["cout"] * out ** 2)


def transform_us(shapes: dict[str, np.ndarray], dev: DeviceSpec) -> np.ndarray:
    """Time of one pass's layout transforms on `dev` (us), for NCHW tensors on the tensor path."""
    nbytes = 2.0 * ELEMENT_BYTES * tensor_elements(shapes)
    return TRANSFORMS_PER_PASS * FIXED_US + nbytes / (BANDWIDTH_SHARE * dev.bandwidth_gbs * 1e3)


def tf32_on_tensor_cores(shapes: dict[str, np.ndarray]) -> np.ndarray:
    """Whether cuDNN runs each NCHW TF32 conv row on tensor cores (between transforms) rather
    than on NCHW FP32 kernels: both channel counts multiples of TF32_CHANNEL_MULTIPLE."""
    cin = np.asarray(shapes["cin"], dtype=np.float64)
    cout = np.asarray(shapes["cout"], dtype=np.float64)
    return (np.mod(cin, TF32_CHANNEL_MULTIPLE) == 0) & (np.mod(cout, TF32_CHANNEL_MULTIPLE) == 0)


def transforms_of_rows(rows: KernelArrays, devices: DeviceTable) -> np.ndarray:
    """Transform time in each conv row as measured NCHW (the H100 collection, NeuSight): its
    16-bit rows, and its TF32 rows with aligned channels, on a GPU with tensor cores for the
    precision; 0 elsewhere."""
    out = np.zeros(len(rows))
    if rows.family != "conv":
        return out
    for g in sorted(set(rows.device.tolist())):
        dev = devices.find(g)
        for p in TRANSFORM_PRECISIONS:
            if not dev.peak_tflops.get(p):
                continue
            m = (rows.device == g) & (rows.precision == p)
            if p == "tf32":
                m &= tf32_on_tensor_cores(rows.shapes)
            if m.any():
                out[m] = transform_us({c: v[m] for c, v in rows.shapes.items()}, dev)
    return out


def without_transforms(rows: KernelArrays, devices: DeviceTable) -> tuple[KernelArrays, np.ndarray]:
    """`rows` with each measurement less its transforms (at most 1 - MIN_REMAINING_SHARE of it
    taken away), and the time taken away per row."""
    t = transforms_of_rows(rows, devices)
    latency = np.maximum(rows.latency_us - t, MIN_REMAINING_SHARE * rows.latency_us)
    out = KernelArrays(rows.family, rows.op, rows.device, latency, rows.blocks, rows.shapes, rows.threads,
                       rows.precision)
    return out, rows.latency_us - latency


def metadata() -> dict:
    """What the conv model's JSON records about the layout: the engine adds back the transform
    cost it states (learned_model.cpp conv_transform_us), so it is the one the rows lost."""
    return {"trained_on": "the measured rows less their NCHW<->NHWC transform kernels (habitat.learned."
                          "conv_layout.without_transforms); the engine adds them for NCHW tensor-core "
                          "convolutions (16-bit; TF32 with both channel counts multiples of 8)",
            "fixed_us_per_transform": FIXED_US, "bandwidth_share": BANDWIDTH_SHARE,
            "transforms_per_pass": TRANSFORMS_PER_PASS, "element_bytes": ELEMENT_BYTES,
            "precisions": list(TRANSFORM_PRECISIONS),
            "calibration": "benchmarks/accuracy/conv_layout.py: least squares in log time on the transform "
                           "kernels (CUPTI) of the H100 run of 2026-11-22, dcgan bf16, 40 ops"}
