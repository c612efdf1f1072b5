"""One tensor-parallel rank's parts (habitat.analysis.tensor_shards): Megatron's column- and
row-parallel layers and attention heads, on GEMM parts as the engine and NeuSight's traces give
them (b x (m x k) @ (k x n))."""
from __future__ import annotations

import pytest

from habitat.analysis.tensor_shards import shard

HIDDEN, TOKENS = 1280, 4096


def _gemm(m: float, n: float, k: float, b: float = 1) -> dict[str, float]:
    return {"b": b, "m": m, "n": n, "k": k, "elem_bytes": 4.0}


def _linear(n_out: float, k_in: float) -> dict[str, dict[str, float]]:
    """A linear layer's forward, data-gradient and weight-gradient GEMMs."""
    return {"fw": _gemm(TOKENS, n_out, k_in), "dgrad": _gemm(TOKENS, k_in, n_out), "wgrad": _gemm(n_out, k_in, TOKENS)}


def _dims(shape: dict[str, float] | None) -> tuple[float, float, float, float]:
    assert shape is not None
    return shape["b"], shape["m"], shape["n"], shape["k"]


def _shards(layer: dict[str, dict[str, float]], t: int = 4) -> dict[str, tuple[float, float, float, float]]:
    return {role: _dims(shard("gemm", s, t, TOKENS, HIDDEN, role == "fw")) for role, s in layer.items()}


def test_a_column_parallel_layer_splits_its_output_columns_in_every_pass() -> None:
    assert _shards(_linear(3 * HIDDEN, HIDDEN)) == {"fw": (1, TOKENS, 960, HIDDEN), "dgrad": (1, TOKENS, HIDDEN, 960),
                                                    "wgrad": (1, 960, HIDDEN, TOKENS)}


def test_a_row_parallel_layer_splits_its_inputs_in_every_pass() -> None:
    assert _shards(_linear(HIDDEN, 4 * HIDDEN)) == {"fw": (1, TOKENS, HIDDEN, 1280), "dgrad": (1, TOKENS, 1280, HIDDEN),
                                                    "wgrad": (1, HIDDEN, 1280, TOKENS)}
    # The square attention projection is row-parallel: its input dimension divides.
    assert _shards(_linear(HIDDEN, HIDDEN)) == {"fw": (1, TOKENS, HIDDEN, 320), "dgrad": (1, TOKENS, 320, HIDDEN),
                                                "wgrad": (1, HIDDEN, 320, TOKENS)}


def test_heads_split_and_every_shard_is_a_t_th_of_the_work() -> None:
    assert _dims(shard("gemm", _gemm(1024, 1024, 64, b=80), 4, TOKENS, HIDDEN, True)) == (20, 1024, 1024, 64)
    assert shard("softmax", {"rows": 81920.0, "cols": 1024.0}, 4, TOKENS, HIDDEN, True)["rows"] == 20480
    assert shard("attention", {"batch_heads": 80.0, "l": 1024.0}, 4, TOKENS, HIDDEN, False)["batch_heads"] == 20
    assert shard("elementwise", {"n": 83886080.0}, 4, TOKENS, HIDDEN, True)["n"] == 20971520
    for layer in (_linear(4 * HIDDEN, HIDDEN), _linear(50257, HIDDEN), _linear(HIDDEN, HIDDEN)):
        for role, s in layer.items():
            b, m, n, k = _dims(shard("gemm", s, 4, TOKENS, HIDDEN, role == "fw"))
            assert m * n * k == pytest.approx(s["m"] * s["n"] * s["k"] / 4)


def test_what_the_rule_does_not_describe_is_left_to_the_caller() -> None:
    assert shard("layernorm", {"rows": 4096.0, "cols": 1280.0}, 4, TOKENS, HIDDEN, True) is None
    assert shard("gemm", _gemm(100, 3 * HIDDEN, HIDDEN), 4, TOKENS, HIDDEN, True) is None  # no token dimension
    assert shard("gemm", _gemm(TOKENS, 3000, 5000), 4, TOKENS, HIDDEN, True) is None  # no hidden-size dimension


def test_a_products_rows_and_width_come_from_its_own_operands() -> None:
    """HF GPT-2's Conv1D is addmm(bias, x, weight [in, out]); nn.Linear is linear(x, weight
    [out, in]): the tokens and the hidden size read the right operand of each."""
    from types import SimpleNamespace

    from habitat.analysis.step_shards import product_rows_and_width

    def op(name: str, *shapes: list[int]) -> SimpleNamespace:
        return SimpleNamespace(name=name, input_shapes=list(shapes))

    assert product_rows_and_width(op("aten::linear", [8, 512, 768], [2304, 768], [2304])) == (4096, 2304)
    assert product_rows_and_width(op("aten::addmm", [2304], [4096, 768], [768, 2304])) == (4096, 2304)
    assert product_rows_and_width(op("aten::mm", [4096, 768], [768, 3072])) == (4096, 3072)
    assert product_rows_and_width(op("aten::matmul", [8, 512, 768], [768, 50257])) == (4096, 50257)
    assert product_rows_and_width(op("aten::addmm", [2304], [4096, 768])) == (0, 0)
