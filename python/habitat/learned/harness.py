"""The per-call timing harness of NeuSight's rows (and of a kernel collection's `Latency`): how a
call's measured time L relates to the device time K of its kernels.

NeuSight timed each op call between two CUDA events recorded right after a synchronize
(sitar-lab/NeuSight, neusight/Dataset/collect.py `measure_once`): the GPU is idle when the start
event fires, so the host's time to issue the call (Python, dispatcher, library set-up, launch)
adds to the kernel's. On the H100 collection of 2026-11-26, where every row has both timings,
an additive floor explains L better than the max-like soft maximum the trainers assumed before,
and one whose host share is larger for the smallest kernels better still
(`python benchmarks/accuracy/harness_floor.py`, all files: e.g. bmm fp32 7.9 % additive, 12.2 %
with p = 4, 5.8 % shaped):

    L = K + F (1 + r / (1 + K / KNEE_US))

F is fitted per (GPU, op) with the model; r (SHAPE_RATIO, per family: the median of the H100's
files of that family) and KNEE_US are the H100's.
"""
from __future__ import annotations

import numpy as np

# The kernel time (us) below which the harness's own share grows (tiny kernels: the end event
# waits on a launch the GPU had to wake up for).
KNEE_US = 5.0
# How much larger the floor is for a kernel far below the knee than for one far above it, per
# family: benchmarks/accuracy/harness_floor.py on the H100 rows (bmm/linear 0.45-1.10, conv
# 0-0.30, layer norm 1.2-1.6, softmax 0). Element-wise has no H100 rows with both timings: the
# median over all files. Reduction and batch norm are trained on device time alone (no floor to
# shape).
SHAPE_RATIO = {"gemm": 0.95, "conv": 0.25, "layernorm": 1.4, "softmax": 0.0, "attention": 0.0,
               "elementwise": 0.65, "reduction": 0.0, "batchnorm": 0.0}


def harness_time(family: str, floor_us: np.ndarray, kernel_us: np.ndarray) -> np.ndarray:
    """The harness's time of a call whose kernels take `kernel_us`, behind a floor `floor_us`."""
    return kernel_us + floor_us * (1.0 + SHAPE_RATIO[family] / (1.0 + kernel_us / KNEE_US))
