"""Learned models: weight format, features, data loading and deterministic training."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from habitat.learned import features as feats  # noqa: E402
from habitat.learned import (
    harness,  # noqa: E402
    safetensors_io,  # noqa: E402
)
from habitat.learned.devices import DeviceTable, default_table  # noqa: E402
from habitat.learned.fitting import FitData, TrainConfig, _clamp_inputs, design, fit  # noqa: E402
from habitat.learned.model import EfficiencyMLP  # noqa: E402
from habitat.learned.neusight import load_kernels  # noqa: E402


def _device_time(x: np.ndarray, t_roof: np.ndarray, t: np.ndarray, **kw) -> FitData:
    """Rows timed on the device: no floor, no validation set."""
    n = len(t)
    return FitData(x, t_roof, t, np.full(n, -1), np.full(n, "", dtype=object), **kw)


def test_safetensors_round_trip(tmp_path: Path) -> None:
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1.5], dtype=np.float32)}
    safetensors_io.save(tmp_path / "x.safetensors", tensors, {"family": "gemm"})
    raw = (tmp_path / "x.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    assert header["a"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
    loaded, meta = safetensors_io.load(tmp_path / "x.safetensors")
    assert meta == {"family": "gemm"}
    np.testing.assert_array_equal(loaded["a"], tensors["a"])
    (tmp_path / "bad.safetensors").write_bytes(raw[:-4])
    with pytest.raises(ValueError, match="inconsistent"):
        safetensors_io.load(tmp_path / "bad.safetensors")


def test_device_lookup_is_forgiving() -> None:
    table = default_table()
    assert table.find("NVIDIA_A100-PCIE-40GB") is table.find("NVIDIA A100-PCIE-40GB")
    assert table.find("Tesla_P4").name == table.find("p4").name
    assert table.find("NVIDIA L4").sms == 58  # not NeuSight's 60
    with pytest.raises(KeyError, match="devices.json"):
        table.find("Voodoo 5")


@pytest.mark.parametrize("family", feats.FAMILIES)
def test_features_have_their_names_and_a_positive_roofline(family: str) -> None:
    shapes = {c: np.array([1.0, 64.0, 1024.0]) for c in feats.SHAPE_COLUMNS[family]}
    shapes["elem_bytes"] = np.full(3, 4.0)
    if family == "conv":
        shapes.update(kernel=np.array([1.0, 3.0, 3.0]), stride=np.ones(3), padding=np.ones(3),
                      grad=np.array([0.0, 1.0, 2.0]))
    if family == "attention":
        shapes.update(causal=np.array([0.0, 1.0, 0.0]), backward=np.array([0.0, 0.0, 1.0]),
                      backend=np.array([0.0, 1.0, 2.0]))
    if family in ("softmax", "layernorm"):
        shapes.update(backward=np.array([0.0, 0.0, 1.0]))
    if family == "softmax":
        shapes.update(log=np.array([0.0, 1.0, 0.0]))
    if family == "reduction":
        shapes.update(strided=np.array([0.0, 1.0, 0.0]))
    if family == "batchnorm":
        shapes.update(backward=np.array([0.0, 0.0, 1.0]), channels_last=np.array([0.0, 1.0, 1.0]))
    if family == "elementwise":
        shapes.update(inputs=np.array([1.0, 2.0, 2.0]), transcendental=np.array([0.0, 1.0, 0.0]))
    x, t_roof = feats.compute(family, shapes, default_table().find("T4"))
    assert x.shape == (3, len(feats.FEATURE_NAMES[family]))
    assert np.all(np.isfinite(x)) and np.all(t_roof > 0)
    assert t_roof[2] > t_roof[1] > t_roof[0]


def test_gemm_roofline_uses_the_precision_peak() -> None:
    dev = default_table().find("A100-PCIE-40GB")
    shapes = {"b": np.array([1.0]), "m": np.array([8192.0]), "n": np.array([8192.0]), "k": np.array([8192.0]),
              "elem_bytes": np.array([2.0])}
    _, fp32 = feats.compute("gemm", shapes, dev, "fp32")
    _, bf16 = feats.compute("gemm", shapes, dev, "bf16")
    assert fp32[0] / bf16[0] == pytest.approx(312 / 19.5, rel=1e-6)


def test_a_filter_narrower_than_its_stride_reads_part_of_its_input() -> None:
    # 1x1 stride 2 on 8x8: the forward and the weight gradient read 4x4 of every 8x8 channel;
    # the data gradient writes the whole 8x8 input gradient.
    shapes = {"batch": np.full(3, 2.0), "cin": np.full(3, 16.0), "cout": np.full(3, 4.0), "kernel": np.ones(3),
              "size": np.full(3, 8.0), "stride": np.full(3, 2.0), "padding": np.zeros(3), "elem_bytes": np.full(3, 2.0),
              "grad": np.array([0.0, 1.0, 2.0])}
    _, nbytes = feats.work("conv", shapes)
    weight, output = 4 * 16, 2 * 4 * 4 * 4
    assert list(nbytes / 2) == [2 * 16 * 16 + weight + output, 2 * 16 * 64 + weight + output,
                                2 * 16 * 16 + weight + output]
    # a 3x3 stride-1 filter reads all of its input, as before
    _, dense = feats.work("conv", {**shapes, "kernel": np.full(3, 3.0), "stride": np.ones(3), "padding": np.ones(3)})
    assert list(dense / 2) == [2 * 16 * 64 + 4 * 16 * 9 + 2 * 4 * 64] * 3


def _write_neusight(root: Path) -> None:
    cols = ["OPName", "Latency", "Device", "Grid x", "Grid y", "Grid z", "B", "M", "N", "K"]
    for gpu, scale in (("Tesla T4", 2.0), ("NVIDIA A100-PCIE-40GB", 1.0)):
        d = root / "kernels" / "bmm"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / f"{gpu.replace(' ', '_')}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for i in range(1, 41):
                w.writerow(["bmm", 0.01 * i * scale, gpu, 1, 1, i, i, 64, 32 * i, 16])
    (root / "test").mkdir()
    with open(root / "test" / "bmm.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        w.writerow(["bmm", 0.5, "NVIDIA L4", 1, 1, 4, 4, 64, 128, 16])


def test_loads_both_layouts_with_neusight_dimension_names(tmp_path: Path) -> None:
    _write_neusight(tmp_path)
    k = load_kernels(tmp_path, "kernels")["gemm"]
    assert len(k) == 80 and set(k.device) == {"Tesla T4", "NVIDIA A100-PCIE-40GB"}
    # NeuSight's A[B,M,N] x B[B,N,K]: N is the reduction, K the output columns
    first = k.take(np.array([0]))
    assert (first.shapes["m"][0], first.shapes["k"][0], first.shapes["n"][0]) == (64.0, 32.0, 16.0)
    assert k.latency_us[0] == pytest.approx(10.0 * (1.0 if "A100" in k.device[0] else 2.0))
    t = load_kernels(tmp_path, "test")["gemm"]
    assert list(t.device) == ["NVIDIA L4"]


def test_training_is_deterministic_and_learns(tmp_path: Path) -> None:
    _write_neusight(tmp_path)
    rows = load_kernels(tmp_path, "kernels")["gemm"]
    x, t_roof = design(rows, default_table())
    cfg = TrainConfig(steps=120, batch=64, hidden=(16, 16))
    a = fit("gemm", _device_time(x, t_roof, rows.latency_us), cfg)
    b = fit("gemm", _device_time(x, t_roof, rows.latency_us), cfg)
    for wa, wb in zip(a.weights, b.weights):
        np.testing.assert_array_equal(wa, wb)
    pred = a.predict_from_features(x, t_roof)
    assert np.all(pred >= t_roof * (1 - 1e-12))  # never faster than the roofline
    assert np.all(pred >= a.launch_floor_us)
    err = np.mean(np.abs(pred - rows.latency_us) / rows.latency_us)
    # the synthetic times are 10-400 us against a 0.01-5 us roofline (~98 % error): a fit that
    # learns the efficiency must land within 15 %
    assert err < 0.15 and err < np.mean(np.abs(t_roof - rows.latency_us) / rows.latency_us)
    a.save(tmp_path)
    c = EfficiencyMLP.load(tmp_path, "gemm")
    np.testing.assert_allclose(c.predict_from_features(x, t_roof), pred, rtol=1e-6)


def test_a_model_trained_on_some_features_takes_the_full_design_matrix(tmp_path: Path) -> None:
    # A model records its own inputs and reads them from the whole feature matrix the engine
    # (and design) computes.
    _write_neusight(tmp_path)
    rows = load_kernels(tmp_path, "kernels")["gemm"]
    x, t_roof = design(rows, default_table())
    every = feats.FEATURE_NAMES["gemm"]
    some = tuple(n for n in every if n not in ("log2_align", "log2_elem_bytes"))
    m = fit("gemm", _device_time(x, t_roof, rows.latency_us), TrainConfig(steps=60, batch=64, hidden=(8,), features=some))
    assert tuple(m.metadata["features"]) == some and m.weights[0].shape[1] == len(some)
    assert m.columns() == [every.index(n) for n in some]
    m.save(tmp_path)
    np.testing.assert_allclose(EfficiencyMLP.load(tmp_path, "gemm").predict_from_features(x, t_roof),
                               m.predict_from_features(x, t_roof), rtol=1e-6)
    with pytest.raises(ValueError, match="unknown features log2_rows"):
        fit("gemm", _device_time(x, t_roof, rows.latency_us), TrainConfig(steps=60, features=("log2_rows",)))


def test_input_clamp_is_an_exact_relu_layer() -> None:
    rng = np.random.default_rng(3)
    w = [rng.normal(size=(5, 3)), rng.normal(size=(1, 5))]
    b = [rng.normal(size=5), rng.normal(size=1)]
    lo, hi = np.array([-1.0, -2.0, 0.0]), np.array([1.0, 0.5, 0.0])
    cw, cb = _clamp_inputs(w, b, lo, hi)
    assert len(cw) == 3 and cw[0].shape == (6, 3) and cw[1].shape == (5, 6)
    x = rng.normal(scale=3.0, size=(50, 3))

    def run(ws, bs, h):
        for i, (wi, bi) in enumerate(zip(ws, bs)):
            h = h @ wi.T + bi
            h = np.maximum(h, 0.0) if i + 1 < len(ws) else h
        return h
    np.testing.assert_allclose(run(cw, cb, x), run(w, b, np.clip(x, lo, hi)), atol=1e-12)


def test_rows_timed_per_call_teach_the_kernel_and_the_floor_is_fitted(tmp_path: Path) -> None:
    """Rows measured behind a per-call harness (habitat.learned.harness): the model learns the
    kernel time, and the floor, started from the least rows' time, ends near the one added."""
    _write_neusight(tmp_path)
    rows = load_kernels(tmp_path, "kernels")["gemm"]
    x, t_roof = design(rows, default_table())
    kernel = rows.latency_us.copy()
    measured = harness.harness_time("gemm", np.full(len(kernel), 30.0), kernel)
    data = FitData(x, t_roof, measured, np.zeros(len(kernel), dtype=np.int64), np.full(len(kernel), "", dtype=object))
    m = fit("gemm", data, TrainConfig(steps=1500, batch=64, hidden=(16, 16), lr=1e-2))
    (floor,) = m.metadata["floors_us"]
    assert 24.0 < floor < 36.0
    big = kernel > 100.0
    assert np.mean(np.abs(m.predict_from_features(x[big], t_roof[big]) - kernel[big]) / kernel[big]) < 0.15
    # the kernel of a small call is forecast, not its harness time
    small = kernel < 15.0
    assert np.all(m.predict_from_features(x[small], t_roof[small]) < 25.0)


def test_parts_of_one_measurement_are_fitted_as_their_sum(tmp_path: Path) -> None:
    """A measured time of two parts (a traced convolution_backward's two passes): the sum of the
    parts' forecasts is fitted, and each part's own time comes out of it."""
    _write_neusight(tmp_path)
    rows = load_kernels(tmp_path, "kernels")["gemm"]
    x, t_roof = design(rows, default_table())
    kernel = rows.latency_us.copy()
    n = len(kernel)
    # rows 2i and 2i+1 form one measurement of their summed time
    ids = np.repeat(np.arange(n // 2), 2)
    total = np.bincount(ids, weights=kernel)[ids]
    data = _device_time(x, t_roof, total, measurement=ids, scale=np.ones(n))
    first, table = data.parts()
    assert table.shape == (n // 2, 2) and list(table[0]) == [0, 1] and list(first[:2]) == [0, 2]
    m = fit("gemm", data, TrainConfig(steps=600, batch=32, hidden=(16, 16)))
    pred = m.predict_from_features(x, t_roof)
    summed = np.bincount(ids, weights=pred)
    assert np.mean(np.abs(summed - np.bincount(ids, weights=kernel)) / np.bincount(ids, weights=kernel)) < 0.15


WEIGHTS = Path(__file__).resolve().parents[3] / "weights"


@pytest.mark.skipif(not (WEIGHTS / "elementwise.json").is_file(), reason="weights not trained")
def test_shipped_elementwise_model_forecasts_tiny_ops_at_the_launch_floor() -> None:
    """NeuSight's harness floor (25-60 us per call) is not GPU time: a 1k-element add (an
    optimizer op on a small parameter) forecasts at the launch floor, large ones scale."""
    model = EfficiencyMLP.load(WEIGHTS, "elementwise")
    dev = default_table().find("A100-PCIE-40GB")
    n = np.array([1e3, 1e5, 1e8])
    shapes = {"n": n, "inputs": np.full(3, 2.0), "transcendental": np.zeros(3), "elem_bytes": np.full(3, 4.0)}
    t = model.predict(shapes, dev)
    assert 0.5 <= model.launch_floor_us <= 5.0
    assert t[0] < 5.0
    assert t[1] < 10.0
    roofline = 12.0 * n[2] / (dev.bandwidth_gbs * 1e3)
    assert roofline < t[2] < 2.0 * roofline


def test_device_table_reads_a_user_file(tmp_path: Path) -> None:
    doc = {"devices": [{"name": "X1", "aliases": ["Fancy X1"], "sms": 10, "memory_bandwidth_gbs": 100,
                        "l2_mb": 1, "peak_tflops": {"fp32": 1.0}}]}
    (tmp_path / "d.json").write_text(json.dumps(doc))
    t = DeviceTable.load(tmp_path / "d.json")
    assert t.find("fancy-x1").peak_flops("bf16") == 1e12  # falls back to the FP32 peak
