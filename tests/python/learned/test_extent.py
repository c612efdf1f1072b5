"""Shapes past a model's training rows (habitat.learned.extent)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from habitat.learned import extent
from habitat.learned import features as feats
from habitat.learned.devices import default_table
from habitat.learned.model import EfficiencyMLP

WEIGHTS = Path(__file__).resolve().parents[3] / "weights"


def _shapes(m, n, k, elem_bytes=2.0) -> dict[str, np.ndarray]:
    m, n, k = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, float)) for v in (m, n, k)))
    return {"b": np.ones_like(m), "m": m, "n": n, "k": k, "elem_bytes": np.full(m.shape, elem_bytes)}


def _stub(s: dict[str, np.ndarray]) -> np.ndarray:
    """Affine in m, rising in n up to 6000 and flat after."""
    return 5.0 + 0.01 * s["m"] + 2.0 * np.minimum(s["n"], 6000.0) / 1000.0


def test_the_extension_follows_the_models_slope_on_tensor_cores_only() -> None:
    s = _shapes([4096, 32768, 1024, 50257, 32768], [768, 768, 16384, 768, 768], 768)
    tensor = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    got = extent.extended_us("gemm", s, tensor, _stub)
    plain = _stub(s)
    assert got[0] == plain[0]  # inside the extent
    assert got[1] == pytest.approx(plain[1])  # affine in m: the same line
    at, half = _stub(_shapes(1024, 8192, 768))[0], _stub(_shapes(1024, 4096, 768))[0]
    assert got[2] == pytest.approx(at + (at - half) / 4096 * (16384 - 8192))
    assert got[3] == plain[3]  # 50257 is odd: the whole shape's forecast
    assert got[4] == plain[4]  # not on tensor cores


@pytest.mark.skipif(not (WEIGHTS / "gemm.safetensors").is_file(), reason="weights not trained")
def test_a_bf16_gemm_keeps_its_rate_as_m_grows() -> None:
    """The net alone forecast a [m, 768] x [768, 3072] bf16 GEMM on the H100 at 625 TFLOPS for
    m = 8192 and 246 for m = 32768; more rows of the same tiles keep the rate."""
    model = EfficiencyMLP.load(WEIGHTS, "gemm")
    dev = default_table().find("H100-SXM5-80GB")
    m = np.array([8192.0, 12608.0, 32768.0, 65536.0])
    t = model.predict(_shapes(m, 3072, 768), dev, "bf16")
    rate = 2 * m * 3072 * 768 / t
    assert np.all(np.diff(t) > 0)
    assert rate.min() >= 0.95 * rate[0]
    # FP32 SIMT GEMMs are the net's own (NeuSight's rows reach 65519 in n and k).
    fp32 = model.predict(_shapes(m, 3072, 768, 4.0), dev, "fp32")
    np.testing.assert_allclose(fp32, model.predict_from_features(*feats.compute("gemm", _shapes(m, 3072, 768, 4.0),
                                                                                 dev, "fp32")))


@pytest.mark.skipif(not (WEIGHTS / "elementwise.safetensors").is_file(), reason="weights not trained")
def test_a_large_elementwise_op_keeps_its_bandwidth() -> None:
    """The net alone forecast a bf16 add on the H100 at 2.92 TB/s for 1e8 elements and 2.29 for
    4e9; past the 2^26 elements its rows reach, a stream keeps its rate."""
    model = EfficiencyMLP.load(WEIGHTS, "elementwise")
    dev = default_table().find("H100-SXM5-80GB")
    n = np.array([2.0**26, 1e8, 1e9, 4e9])
    shapes = {"n": n, "inputs": np.full(4, 2.0), "transcendental": np.zeros(4), "elem_bytes": np.full(4, 2.0)}
    t = model.predict(shapes, dev)
    rate = 3 * 2.0 * n / t
    assert np.all(np.diff(t) > 0)
    assert rate[1:].min() >= 0.97 * rate[1]
    # A family without an extent keeps the model's own forecast everywhere.
    np.testing.assert_array_equal(extent.extended_us("attention", shapes, np.zeros(4), lambda s: 2 * s["n"]), 2 * n)


@pytest.mark.skipif(not (WEIGHTS / "layernorm.safetensors").is_file(), reason="weights not trained")
def test_a_large_layer_norm_keeps_its_bandwidth() -> None:
    """The net alone forecast an fp32 layer norm of 1024 columns on the H100 at 1.84 TB/s for
    2^25 elements and 0.74 for 2^30; past the 2^25 elements its rows reach, more rows add time at
    the rate of its last octave (1.76 TB/s)."""
    model = EfficiencyMLP.load(WEIGHTS, "layernorm")
    dev = default_table().find("H100-SXM5-80GB")
    rows = 2.0 ** np.arange(15, 21)  # 2^25 to 2^30 elements
    shapes = {"rows": rows, "cols": np.full(6, 1024.0), "elem_bytes": np.full(6, 4.0), "backward": np.zeros(6)}
    t = model.predict(shapes, dev)
    rate = 2 * 4.0 * rows * 1024 / t
    assert np.all(np.diff(t) > 0)
    assert rate[1:].min() >= 0.9 * rate[0]
    # Inside the extent, the model's own forecast.
    inside = {c: v[:1] for c, v in shapes.items()}
    np.testing.assert_allclose(t[:1], model.predict_from_features(*feats.compute("layernorm", inside, dev)))


@pytest.mark.skipif(not (WEIGHTS / "softmax.safetensors").is_file(), reason="weights not trained")
def test_a_large_softmax_keeps_its_bandwidth_a_log_softmax_inside_its_rows_keeps_the_net() -> None:
    """The net alone forecast a bf16 softmax backward of 4096 columns on the H100 at 1.29 TB/s for
    2^25 elements and 0.82 for 2^28; its log-softmax rows reach 2^29 elements and keep the net
    up to there."""
    model = EfficiencyMLP.load(WEIGHTS, "softmax")
    dev = default_table().find("H100-SXM5-80GB")
    rows = 2.0 ** np.arange(13, 19)  # 2^25 to 2^30 elements

    def shapes(log: float) -> dict[str, np.ndarray]:
        return {"rows": rows, "cols": np.full(6, 4096.0), "elem_bytes": np.full(6, 2.0),
                "backward": np.ones(6), "log": np.full(6, log)}
    t = model.predict(shapes(0.0), dev)
    rate = rows / t
    assert np.all(np.diff(t) > 0)
    assert rate[1:].min() >= 0.9 * rate[0]
    s = shapes(1.0)
    net = model.predict_from_features(*feats.compute("softmax", s, dev))
    np.testing.assert_allclose(model.predict(s, dev)[:5], np.maximum(net, 0)[:5])
    assert model.predict(s, dev)[5] != pytest.approx(net[5])  # 2^30: past the log-softmax rows
