"""A tensor-core GEMM larger than the shapes the model was trained on.

The device-time collections draw each GEMM dimension up to 8192
(`benchmarks/gpu/kernel_shapes.py` gemm_shapes), and on tensor cores nothing else reaches further
but the recorded steps' vocabulary GEMMs. Past that the ReLU net extrapolates its efficiency
along the log-sizes and falls: on the H100, a bf16 [m, 768] x [768, 3072] GEMM is forecast at
625 TFLOPS for m = 8192 and 246 for m = 32768, where a bigger m only adds waves of the same
tiles. ViT-B/16's m = 12608 GEMMs were forecast 18-34 % slow, T5's vocabulary weight gradient
(m = 32128) 2.5x. (FP32 SIMT GEMMs have NeuSight's rows up to 65519 in n and k and keep a flat
efficiency there: they are left to the net.)

Such a dimension D is forecast from the model inside its data: at D = EXTENT and D = EXTENT / 2
the time's slope per unit of D, extended linearly from EXTENT (each further unit adds the same
tiles' work; the fixed part, the launch, ramp and last wave's tail, is counted once). A dimension
is extended only when it is a multiple of 16 bytes, like EXTENT: an unaligned one runs narrower
kernels (features.log2_align) that the two points would not keep, and a transposed operand's
leading dimension (m of a weight gradient) is not among the features at all, so those keep the
whole-shape forecast. csrc/src/learned/gemm_extent.cpp mirrors this.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from habitat.learned import features as feats

EXTENT = 8192.0  # the largest GEMM dimension the collections draw
DIMENSIONS = ("m", "n", "k")  # extended in this order (the engine's order too)

Predict = Callable[[dict[str, np.ndarray]], np.ndarray]


def beyond(shapes: dict[str, np.ndarray], dim: str, tensor_path: np.ndarray) -> np.ndarray:
    """Rows whose `dim` lies past EXTENT on tensor cores, a multiple of 16 bytes."""
    d = shapes[dim]
    aligned = feats.log2_align(d, d, shapes["elem_bytes"]) >= np.log2(feats.MAX_ALIGN_BYTES)
    return (tensor_path > 0) & (d > EXTENT) & aligned


def extended_us(shapes: dict[str, np.ndarray], tensor_path: np.ndarray, predict: Predict,
                dims: tuple[str, ...] = DIMENSIONS) -> np.ndarray:
    """`predict` (the model's time of each row) with every dimension of `dims` that lies
    beyond the data extended linearly from EXTENT."""
    if not dims:
        return predict(shapes)
    dim, rest = dims[0], dims[1:]
    over = beyond(shapes, dim, tensor_path)
    if not over.any():
        return extended_us(shapes, tensor_path, predict, rest)
    d = shapes[dim]
    at = {c: v.copy() for c, v in shapes.items()}
    at[dim] = np.where(over, EXTENT, d)
    half = {**at, dim: np.where(over, EXTENT / 2, d)}
    t_extent = extended_us(at, tensor_path, predict, rest)
    t_half = extended_us(half, tensor_path, predict, rest)
    slope = np.maximum(0.0, (t_extent - t_half) / (EXTENT / 2))
    return np.where(over, t_extent + slope * (d - EXTENT), t_extent)
