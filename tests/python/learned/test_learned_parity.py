"""The engine's C++ features and MLP runtime agree with the Python training code."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from habitat import _engine  # noqa: E402
from habitat.learned import features as feats  # noqa: E402
from habitat.learned.devices import DEFAULT_DB, default_table  # noqa: E402
from habitat.learned.model import load_all  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
WEIGHTS = ROOT / "weights"
GPUS = ["Tesla T4", "NVIDIA A100-PCIE-40GB", "NVIDIA L4", "H100-SXM5-80GB", "P4"]


def _random_shapes(family: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    def dims(lo, hi):
        return np.round(np.exp(rng.uniform(np.log(lo), np.log(hi), n)))
    s: dict[str, np.ndarray] = {"elem_bytes": rng.choice([2.0, 4.0], n)}
    if family == "gemm":
        # past 8192 too, where a tensor-core GEMM is extended from the model (extent.py);
        # a quarter of the dimensions a multiple of 16 elements, which those extensions need
        s.update(b=dims(1, 64), **{d: np.where(rng.random(n) < 0.25, np.ceil(v / 16) * 16, v)
                                   for d, v in (("m", dims(1, 65536)), ("n", dims(1, 65536)), ("k", dims(1, 16384)))})
    elif family == "conv":
        groups = rng.choice([1.0, 1.0, 2.0, 4.0, 32.0], n)  # channels a multiple of the groups
        s.update(batch=dims(1, 64), cin=np.ceil(dims(3, 512) / groups) * groups,
                 cout=np.ceil(dims(8, 512) / groups) * groups, kernel=rng.choice([1.0, 3.0, 7.0], n),
                 size=dims(8, 224), stride=rng.choice([1.0, 2.0], n), padding=rng.choice([0.0, 1.0, 3.0], n),
                 grad=rng.choice([0.0, 1.0, 2.0], n), groups=groups)
    elif family == "elementwise":
        s.update(n=dims(1, 1e9), inputs=rng.choice([1.0, 2.0, 3.0], n), transcendental=rng.choice([0.0, 1.0], n))
    elif family == "attention":
        s.update(batch_heads=dims(1, 512), l=dims(16, 8192), s=dims(16, 8192), e=rng.choice([64.0, 128.0], n),
                 causal=rng.choice([0.0, 1.0], n), backward=rng.choice([0.0, 1.0], n),
                 backend=rng.choice([0.0, 1.0, 2.0], n))
    elif family == "reduction":
        s.update(rows=dims(1, 1e6), cols=dims(1, 65536), strided=rng.choice([0.0, 1.0], n))
    elif family == "batchnorm":
        s.update(count=dims(1, 1e6), channels=dims(1, 4096), backward=rng.choice([0.0, 1.0], n),
                 channels_last=rng.choice([0.0, 1.0], n))
    else:
        s.update(rows=dims(1, 1e6), cols=dims(1, 65536), backward=rng.choice([0.0, 1.0], n))
    return s


@pytest.mark.parametrize("family", feats.FAMILIES)
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp8"])
def test_cpp_features_match_python(family: str, precision: str) -> None:
    rng = np.random.default_rng(7)
    shapes = _random_shapes(family, 40, rng)
    for gpu in GPUS:
        dev = default_table().find(gpu)
        x, t_roof = feats.compute(family, shapes, dev, precision)
        for i in range(len(t_roof)):
            row = {c: float(v[i]) for c, v in shapes.items()}
            cx, ct = _engine.learned_features(family, row, gpu, precision, str(DEFAULT_DB))
            np.testing.assert_allclose(cx, x[i], rtol=1e-9, atol=1e-9)
            assert ct == pytest.approx(t_roof[i], rel=1e-9)


def test_a_conv_shape_without_groups_is_ungrouped_in_both() -> None:
    shape = {"batch": 8.0, "cin": 64.0, "cout": 128.0, "kernel": 3.0, "size": 32.0, "stride": 1.0,
             "padding": 1.0, "elem_bytes": 2.0, "grad": 0.0}
    dev = default_table().find("H100-SXM5-80GB")
    x, t = feats.compute("conv", {c: np.array([v]) for c, v in shape.items()}, dev, "bf16")
    x1, t1 = feats.compute("conv", {c: np.array([v]) for c, v in {**shape, "groups": 1.0}.items()}, dev, "bf16")
    np.testing.assert_array_equal(x, x1)
    cx, ct = _engine.learned_features("conv", shape, "H100-SXM5-80GB", "bf16", str(DEFAULT_DB))
    np.testing.assert_allclose(cx, x[0], rtol=1e-9, atol=1e-9)
    assert ct == pytest.approx(t[0], rel=1e-9) and t[0] == t1[0]


@pytest.mark.skipif(not (WEIGHTS / "gemm.safetensors").is_file(), reason="weights not trained")
@pytest.mark.parametrize("family", feats.FAMILIES)
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_cpp_predictions_match_python(family: str, precision: str) -> None:
    cpp = _engine.load_learned_models(str(WEIGHTS))
    py = load_all(WEIGHTS)
    assert family in cpp.families()
    rng = np.random.default_rng(11)
    shapes = _random_shapes(family, 30, rng)
    for gpu in GPUS:
        expected = py[family].predict(shapes, default_table().find(gpu), precision)
        for i in range(len(expected)):
            row = {c: float(v[i]) for c, v in shapes.items()}
            got = cpp.predict_kernel_us(family, row, gpu, precision, str(DEFAULT_DB))
            assert got == pytest.approx(expected[i], rel=1e-4)


def test_errors_name_the_problem(tmp_path: Path) -> None:
    assert _engine.load_learned_models(str(tmp_path)) is None
    with pytest.raises(ValueError, match="unknown learned family"):
        _engine.learned_features("lstm", {}, "T4", "fp32", str(DEFAULT_DB))
    with pytest.raises(Exception, match="must be positive|lacks column"):
        _engine.learned_features("gemm", {"b": 1.0}, "T4", "fp32", str(DEFAULT_DB))
