"""Shapes larger than a model's training rows: where the ReLU net stops extrapolating.

Past its data the net extrapolates its efficiency along the log-sizes, and for four families it
falls where the hardware's does not:

- GEMM on tensor cores. The device-time collections draw each dimension up to 8192
  (`benchmarks/gpu/kernel_shapes.py` gemm_shapes), and nothing else on tensor cores reaches
  further but the recorded steps' vocabulary GEMMs. On the H100 a bf16 [m, 768] x [768, 3072]
  GEMM was forecast at 625 TFLOPS for m = 8192 and 246 for m = 32768, where a bigger m only adds
  waves of the same tiles: ViT-B/16's m = 12608 GEMMs were forecast 18-34 % slow, T5's
  vocabulary weight gradient (m = 32128) 2.5x. A dimension is extended only when it is a
  multiple of 16 bytes, like the extent: an unaligned one runs narrower kernels
  (features.log2_align) that the points inside would not keep, and a transposed operand's
  leading dimension (m of a weight gradient) is not among the features at all. FP32 SIMT GEMMs
  have NeuSight's rows up to 65519 in n and k and keep a flat efficiency there: left to the net.
- Element-wise ops. The model trained on NeuSight's rows (n up to 6.3e7) and the recorded steps
  (up to 5.1e7); past 2^26 its H100 bandwidth fell from 2.92 TB/s at 1e8 elements to 2.43 at 1e9
  and 2.29 at 4e9. On the H100 and H200 families collections' element-wise rows, which it never
  trained on, it was +6.9 / +3.9 % (signed mean) over the 1.3e8-3e8-element ones against -4.5 /
  -4.4 % inside the extent.

- Layer norm. Every source's rows stop at about 2^25 elements (rows x cols: the H100's and H200's
  collections 2^25, NeuSight's 2^25.9); past that the H100 forward's bandwidth fell from 1.84 TB/s
  (fp32, 1024 columns) at 2^25 to 1.32 at 2^27 and 0.74 at 2^30 (the bf16 backward's by up to a
  fifth), where the measured rows' rate rises up to their largest size. Rows are the kernel's
  parallel work (one block per row): at 2^25 elements a 1024-wide norm has 32768 rows, some 250
  per SM, so each further row adds the same time. The extent is on the rows, at 2^25 elements over
  the row's length. Checked by training the model without the rows past 2^L elements and scoring
  the H100's and H200's rows from 2^L to 2^25 (mean absolute %, H100 / H200): L = 23, the net 15.3
  / 16.9, the extension from 2^23 14.6 / 14.9; L = 24, the net 12.6 / 17.7, the extension 12.4 /
  15.7; L = 22, where the rate is still rising, the net 23.0 / 15.6, the extension worse, 28.0 /
  20.1.
- Softmax, the same way: its rows stop at 2^25 elements (the H100's collection; NeuSight's
  2^25.9), its log-softmax rows at 2^29 (the H100's families collection), and past them the
  H100's backward fell from 1.29 TB/s (bf16, 4096 columns) at 2^25 to 0.82 at 2^28. Checked as
  for layer norm on the softmax rows (log-softmax rows all kept): L = 23, the net 35.5 / 27.3,
  the extension 21.3 / 21.4 (the net's backward +43 to +54 % two octaves out); L = 24, 21.3 /
  16.7 and 18.2 / 16.0; L = 22, 25.9 / 36.2 and 23.5 / 34.7. On the H200's log-softmax rows of
  2^28-2^30 elements, which it never trained on, an extension from 2^25 would have been worse
  than the net (10.7-23.0 % against 3.8-20.9 % per pass and precision): those rows are inside
  the log-softmax rows' own extent.

A dimension D past the extent E is forecast as the model's time at E plus the slope between E / 2
and E times D - E: each further unit adds the same work, and the fixed part (launch, ramp, the
last wave's tail) is counted once. csrc/src/learned/shape_extent.cpp mirrors this.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from habitat.learned import features as feats

Predict = Callable[[dict[str, np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class Extent:
    dims: tuple[str, ...]  # extended in this order (the engine's order too)
    limit: float
    tensor_cores_aligned: bool = False  # only on tensor cores, dimensions of 16-byte multiples
    per: str = ""  # the limit is on the product of the dimension and this column (its elements)
    # (column, value, limit): rows whose column holds that value have this limit instead
    otherwise: tuple[str, float, float] | None = None

    def limit_of(self, shapes: dict[str, np.ndarray]) -> np.ndarray | float:
        limit: np.ndarray | float = self.limit
        if self.otherwise is not None:
            column, value, other = self.otherwise
            if column in shapes:  # an optional column (softmax's log) is absent as 0
                limit = np.where(shapes[column] == value, other, self.limit)
            elif value == 0.0:
                limit = other
        return limit / shapes[self.per] if self.per else limit


EXTENTS = {"gemm": Extent(("m", "n", "k"), 8192.0, tensor_cores_aligned=True),
           "elementwise": Extent(("n",), 2.0**26),
           "layernorm": Extent(("rows",), 2.0**25, per="cols"),
           "softmax": Extent(("rows",), 2.0**25, per="cols", otherwise=("log", 1.0, 2.0**29))}


def beyond(extent: Extent, shapes: dict[str, np.ndarray], dim: str, tensor_path: np.ndarray) -> np.ndarray:
    """Rows whose `dim` lies past the extent (and, where the extent says so, on tensor cores and
    a multiple of 16 bytes)."""
    d = shapes[dim]
    limit = extent.limit_of(shapes)
    # a half extent of a whole row at least (a row longer than the limit is not extended)
    over = (d > limit) & (limit >= 2.0)
    if extent.tensor_cores_aligned:
        aligned = feats.log2_align(d, d, shapes["elem_bytes"]) >= np.log2(feats.MAX_ALIGN_BYTES)
        over &= (tensor_path > 0) & aligned
    return over


def any_beyond(family: str, shapes: dict[str, np.ndarray], tensor_path: np.ndarray) -> bool:
    """Whether any row has a dimension past the family's extent (False without an extent)."""
    extent = EXTENTS.get(family)
    return extent is not None and any(beyond(extent, shapes, d, tensor_path).any() for d in extent.dims)


def extended_us(family: str, shapes: dict[str, np.ndarray], tensor_path: np.ndarray, predict: Predict,
                dims: tuple[str, ...] | None = None) -> np.ndarray:
    """`predict` (the model's time of each row) with every dimension of the family's extent that
    lies beyond it extended linearly; `predict` itself for a family without one."""
    extent = EXTENTS.get(family)
    if extent is None:
        return predict(shapes)
    dims = extent.dims if dims is None else dims
    if not dims:
        return predict(shapes)
    dim, rest = dims[0], dims[1:]
    over = beyond(extent, shapes, dim, tensor_path)
    if not over.any():
        return extended_us(family, shapes, tensor_path, predict, rest)
    d = shapes[dim]
    limit = extent.limit_of(shapes)
    at = {**shapes, dim: np.where(over, limit, d)}
    half = {**shapes, dim: np.where(over, limit / 2, d)}
    t_at = extended_us(family, at, tensor_path, predict, rest)
    t_half = extended_us(family, half, tensor_path, predict, rest)
    slope = np.maximum(0.0, (t_at - t_half) / (limit / 2))
    return np.where(over, t_at + slope * (d - limit), t_at)
