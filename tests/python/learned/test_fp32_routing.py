"""Which model serves a row (weights/README.md, 'Which model serves what'): <family>_fp32 for fp32
rows whose roofline is at least its from_roofline_us, <family> for the rest, in Python as in the
engine (the engine side: tests/cpp/learned/test_fp32_routing.cpp and test_learned_parity.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from habitat.learned import features as feats
from habitat.learned.devices import default_table
from habitat.learned.model import EfficiencyMLP, Fp32Routed, load_all

WEIGHTS = Path(__file__).resolve().parents[3] / "weights"


@pytest.mark.skipif(not (WEIGHTS / "gemm_fp32.safetensors").is_file(), reason="no FP32 model")
@pytest.mark.parametrize("family", ["gemm", "conv"])
def test_fp32_rows_above_the_threshold_use_the_fp32_model(family: str) -> None:
    routed = load_all(WEIGHTS)[family]
    assert isinstance(routed, Fp32Routed)
    main = EfficiencyMLP.load(WEIGHTS, family)
    fp32 = EfficiencyMLP.load(WEIGHTS, family, f"{family}_fp32")
    assert fp32.metadata["from_roofline_us"] > 0 and "serves" in fp32.metadata
    sizes = np.array([32.0, 128.0, 512.0, 2048.0, 8192.0])
    if family == "gemm":
        shapes = {"b": np.ones(5), "m": sizes, "n": sizes, "k": sizes, "elem_bytes": np.full(5, 4.0)}
    else:
        shapes = {"batch": np.full(5, 32.0), "cin": sizes / 4, "cout": sizes / 4, "kernel": np.full(5, 3.0),
                  "size": np.full(5, 56.0), "stride": np.ones(5), "padding": np.ones(5),
                  "elem_bytes": np.full(5, 4.0), "grad": np.zeros(5)}
    dev = default_table().find("NVIDIA A100-PCIE-40GB")
    _, t_roof = feats.compute(family, shapes, dev, "fp32")
    use = t_roof >= fp32.metadata["from_roofline_us"]
    assert use.any() and not use.all()
    got = routed.predict(shapes, dev, "fp32")
    np.testing.assert_allclose(got[use], fp32.predict(shapes, dev, "fp32")[use])
    np.testing.assert_allclose(got[~use], main.predict(shapes, dev, "fp32")[~use])
    half = dict(shapes, elem_bytes=np.full(5, 2.0))
    np.testing.assert_allclose(routed.predict(half, dev, "bf16"), main.predict(half, dev, "bf16"))
