"""cuDNN's layout-transform kernels: what cuDNN launches around its NHWC kernels when it is given
NCHW tensors, by the direction they move the data. Torch-free, so that the kernel collector (on
the GPU machine) and the conv layout check (benchmarks/accuracy/conv_layout.py) read one list."""
from __future__ import annotations

TRANSFORM_KINDS = {"nchwToNhwc": "nchw_to_nhwc", "nchwToFoldedNhwc": "nchw_to_nhwc",
                   "nhwcToNchw": "nhwc_to_nchw", "foldedNhwcToNchw": "nhwc_to_nchw",
                   "tensorTransformGeneric": "generic"}


def transform_kind(kernel_name: str) -> str | None:
    """The direction of a cuDNN layout transform kernel, or None for any other kernel."""
    return next((kind for key, kind in TRANSFORM_KINDS.items() if key in kernel_name), None)
