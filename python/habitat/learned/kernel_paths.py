"""Which units a measured GEMM or convolution ran on, read from its kernel names.

cuBLAS and cuDNN pick, for each call, the kernel they expect (or, with `cudnn.benchmark`, find) to
be fastest, and that is not always a tensor-core kernel of the precision asked for: on the H100
collection of 2026-11-26, 50 of 441 TF32 bmm rows and 37 of 81 TF32 NCHW convolution passes ran
FP32 SIMT kernels (`*_f32f32_f32f32_*`, `wgrad_alg0_engine`, `dgrad_engine`, FFT, Winograd),
while every channels-last TF32 pass but 7 ran tensor-core kernels. A row is a measurement of
the path that ran, so the trainers give each row the precision of its path (`path_precision`):
its nominal one on tensor cores, fp32 on SIMT kernels. The engine forecasts both paths where the
library has the choice and takes the faster (csrc/src/learned/learned_model.cpp).
"""
from __future__ import annotations

# Kernel-name fragments of FP32 SIMT kernels (CUDA cores, no tensor cores).
SIMT_MARKS = ("f32f32_f32f32", "simt_sgemm", "implicit_convolve_sgemm<float", "precomputed_convolve_sgemm<float",
              "dgrad_engine", "dgrad_alg1_engine", "wgrad_alg0_engine", "fft", "winograd", "grouped_direct_kernel",
              "gemmSN", "cf32cf32", "region_transform", "magma_sgemm")
# cuDNN's NCHW <-> NHWC layout transforms run around tensor-core passes on NCHW tensors; they
# say nothing about the pass's own units.
TRANSFORM_MARKS = ("nchwToNhwc", "nhwcToNchw", "tensorTransform")
# A library's copies and memsets within the GPU's memory (CUPTI's memcpy and memset records, named
# as torch.profiler names them; habitat/trace.h in the engine): no units of their own either.
MEMORY_OPERATIONS = ("Memcpy DtoD (Device -> Device)", "Memset (Device)")


def kernel_names(kernels: str) -> list[str]:
    """The kernel names of a collected row's `Kernels` column (';'-separated, leading ';')."""
    return [k for k in kernels.split(";") if k]


def ran_transforms(kernels: str) -> bool:
    return any(any(m in k for m in TRANSFORM_MARKS) for k in kernel_names(kernels))


def ran_simt(kernels: str) -> bool:
    """Whether every kernel of the row but the layout transforms is an FP32 SIMT kernel."""
    names = [k for k in kernel_names(kernels)
             if not any(m in k for m in TRANSFORM_MARKS) and k not in MEMORY_OPERATIONS]
    return bool(names) and all(any(m in k for m in SIMT_MARKS) for k in names)


def path_precision(precision: str, kernels: str) -> str:
    """The precision of the units a row's kernels ran on: fp32 for a tf32 row that ran FP32 SIMT
    kernels, the row's own precision otherwise (16-bit rows ran tensor-core kernels on the GPUs
    measured but 23 of the 125 bf16 NCHW 2-D forward convolution rows, on SIMT kernels in about
    their fp32 twins' time: too few to model apart; the engine takes the FP32 pass's forecast
    where it is the faster, csrc/src/learned/learned_model.cpp nchw_simt_forward_us)."""
    return "fp32" if precision == "tf32" and ran_simt(kernels) else precision
