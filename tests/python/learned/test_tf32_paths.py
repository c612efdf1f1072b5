"""Which units a TF32 GEMM is forecast on: a batched one (bmm) on the faster of tensor cores and
FP32 SIMT (cuBLAS picks SIMT kernels for some), a linear layer's on tensor cores alone (the
collections' TF32 linears almost never ran SIMT kernels; csrc/src/learned/learned_model.cpp)."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from habitat.data import engine  # noqa: E402

GPU = "H100-SXM5-80GB"


def _t(shape: list[int]) -> dict:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return {"shape": shape, "strides": strides, "dtype": "float32", "device": "cuda:0"}


def _addmm(m: int, k: int, n: int) -> dict:
    return {"id": 0, "name": "aten::addmm", "phase": "forward", "start_us": 0, "wall_us": 10,
            "args": [{"name": "self", "tensor": _t([n])}, {"name": "mat1", "tensor": _t([m, k])},
                     {"name": "mat2", "tensor": _t([k, n])}],
            "outputs": [_t([m, n])]}


def _bmm(b: int, m: int, k: int, n: int) -> dict:
    return {"id": 0, "name": "aten::bmm", "phase": "forward", "start_us": 0, "wall_us": 10,
            "args": [{"name": "self", "tensor": _t([b, m, k])}, {"name": "mat2", "tensor": _t([b, k, n])}],
            "outputs": [_t([b, m, n])]}


def _us(op: dict, tf32: bool) -> float:
    origin = {"device": "cpu", "matmul_allow_tf32": tf32, "float32_matmul_precision": "high" if tf32 else "highest"}
    _, rows = engine.forecast_step_parts(origin, {"index": 0, "wall_ms": 1.0, "ops": [op]}, [GPU])
    return float(rows.array["time_us"].ravel()[0])


@pytest.mark.parametrize("m,k,n", [(16, 16, 48), (32, 16, 224), (1024, 768, 3072)])
def test_a_tf32_linear_is_forecast_on_tensor_cores(m: int, k: int, n: int) -> None:
    tf32, fp32 = _us(_addmm(m, k, n), True), _us(_addmm(m, k, n), False)
    assert tf32 > 0 and fp32 > 0
    if m * k * n > 1e8:
        assert tf32 < fp32  # a large GEMM: the tensor cores' rate shows
    # The tiny ones: FP32 mode's SIMT kernel (~2 us) is not what TF32 mode runs (~4 us).
    if m * k * n < 2e5:
        assert tf32 > fp32


@pytest.mark.parametrize("b,m,k,n", [(30, 40, 1243, 16), (8, 1024, 64, 1024)])
def test_a_tf32_bmm_takes_the_faster_of_its_two_paths(b: int, m: int, k: int, n: int) -> None:
    assert _us(_bmm(b, m, k, n), True) <= _us(_bmm(b, m, k, n), False) * (1 + 1e-9)
