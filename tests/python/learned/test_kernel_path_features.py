"""The learned features that say which kernel path runs (features.py): the FP32 lanes per SM on
the FP32 SIMT path of a GEMM, and whether PyTorch's vectorized layer-norm kernel runs."""
from __future__ import annotations

import numpy as np
import pytest

from habitat.learned import features as F
from habitat.learned.devices import default_table


def _feature(family: str, name: str, shapes: dict[str, list[float]], gpu: str, precision: str) -> np.ndarray:
    x, _ = F.compute(family, {k: np.asarray(v, dtype=np.float64) for k, v in shapes.items()},
                     default_table().find(gpu), precision)
    return x[:, F.FEATURE_NAMES[family].index(name)]


GEMM = {"b": [1.0], "m": [4096.0], "n": [4096.0], "k": [4096.0], "elem_bytes": [4.0]}


@pytest.mark.parametrize(("gpu", "lanes"), [("A100-SXM4-80GB", 64), ("V100-SXM2-32GB", 64), ("T4", 64),
                                             ("H100-SXM5-80GB", 128), ("L4", 128)])
def test_simt_lanes_is_the_fp32_lanes_per_sm_per_clock(gpu: str, lanes: int) -> None:
    assert _feature("gemm", "simt_lanes", GEMM, gpu, "fp32")[0] == pytest.approx(np.log2(lanes), abs=0.01)


def test_simt_lanes_is_zero_on_tensor_cores() -> None:
    bf16 = dict(GEMM, elem_bytes=[2.0])
    assert _feature("gemm", "simt_lanes", bf16, "H100-SXM5-80GB", "bf16")[0] == 0.0
    assert _feature("gemm", "simt_lanes", GEMM, "H100-SXM5-80GB", "tf32")[0] == 0.0


def test_layer_norm_is_vectorized_over_multiples_of_four() -> None:
    shapes = {"rows": [4096.0] * 4, "cols": [768.0, 2107.0, 4.0, 18.0], "elem_bytes": [2.0] * 4,
              "backward": [0.0] * 4}
    got = _feature("layernorm", "vectorized", shapes, "H100-SXM5-80GB", "bf16")
    assert got.tolist() == [1.0, 0.0, 1.0, 0.0]
