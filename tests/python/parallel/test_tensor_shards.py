"""One tensor-parallel rank's parts (habitat.evaluate.tensor_shards): Megatron's column- and
row-parallel layers, attention heads, on the parts NeuSight's traces hold."""
from __future__ import annotations

import pytest

from habitat.evaluate import models as M
from habitat.evaluate.tensor_shards import shard

HIDDEN = 1280


def _linear(n_out: float, k_in: float, tokens: float = 4096.0) -> M.NodeWork:
    """A linear layer's forward, data-gradient and weight-gradient GEMMs as the traces hold them."""
    return M.NodeWork("addmm", 36, {}, {"fw": [M._gemm(1, tokens, n_out, k_in)],
                                        "bw": [M._gemm(1, tokens, k_in, n_out), M._gemm(1, k_in, n_out, tokens)]})


def _dims(part: M.Part) -> tuple[float, float, float, float]:
    return part.shape["b"], part.shape["m"], part.shape["n"], part.shape["k"]


def test_a_column_parallel_layer_splits_its_output_columns_in_every_pass() -> None:
    qkv = _linear(3 * HIDDEN, HIDDEN)
    assert _dims(shard(qkv, qkv.parts["fw"][0], "fw", HIDDEN, 4)) == (1, 4096, 960, 1280)
    dgrad, wgrad = (shard(qkv, p, "bw", HIDDEN, 4) for p in qkv.parts["bw"])
    assert _dims(dgrad) == (1, 4096, 1280, 960)
    assert _dims(wgrad) == (1, 1280, 960, 4096)


def test_a_row_parallel_layer_splits_its_inputs_in_every_pass() -> None:
    for layer in (_linear(HIDDEN, 4 * HIDDEN), _linear(HIDDEN, HIDDEN)):  # MLP 4h->h, attention projection
        k_in = layer.parts["fw"][0].shape["k"]
        assert _dims(shard(layer, layer.parts["fw"][0], "fw", HIDDEN, 4)) == (1, 4096, HIDDEN, k_in / 4)
        dgrad, wgrad = (shard(layer, p, "bw", HIDDEN, 4) for p in layer.parts["bw"])
        assert _dims(dgrad) == (1, 4096, k_in / 4, HIDDEN)
        assert _dims(wgrad) == (1, k_in / 4, HIDDEN, 4096)


def test_attention_splits_by_heads_and_every_shard_is_a_quarter_of_the_work() -> None:
    scores = M.NodeWork("matmul", 36, {}, {"fw": [M._gemm(80, 1024, 1024, 64)]})
    assert _dims(shard(scores, scores.parts["fw"][0], "fw", HIDDEN, 4)) == (20, 1024, 1024, 64)
    soft = M.Part("softmax", {"rows": 81920.0, "cols": 1024.0, "elem_bytes": 4.0, "backward": 0.0})
    assert shard(scores, soft, "fw", HIDDEN, 4).shape["rows"] == 20480
    assert shard(scores, M._elem(83886080.0, 1), "fw", HIDDEN, 4).shape["n"] == 20971520
    with pytest.raises(ValueError, match="layernorm"):
        shard(scores, M.Part("layernorm", {"rows": 4096.0, "cols": 1280.0}), "fw", HIDDEN, 4)
    layer = _linear(4 * HIDDEN, HIDDEN)
    for phase, parts in layer.parts.items():
        for p in parts:
            s = shard(layer, p, phase, HIDDEN, 4).shape
            assert s["m"] * s["n"] * s["k"] == pytest.approx(p.shape["m"] * p.shape["n"] * p.shape["k"] / 4)
