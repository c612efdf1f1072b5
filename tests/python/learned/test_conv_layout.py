"""Convolution memory layout (habitat.learned.conv_layout): the conv model is trained on the
H100 collection's rows less cuDNN's NCHW <-> NHWC transforms, and the engine adds them back for
NCHW tensor-core convolutions only (16-bit, and TF32 with channels in multiples of 8): the same
convolution channels-last is forecast without them, and a TF32 one with unaligned channels runs
as FP32 work."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from habitat import _engine  # noqa: E402
from habitat.data import engine  # noqa: E402
from habitat.learned import conv_layout  # noqa: E402
from habitat.learned.devices import default_table  # noqa: E402
from habitat.learned.neusight import load_precision_kernels  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
WEIGHTS = ROOT / "weights"
COLLECTION = ROOT / "benchmarks" / "results" / "kernels" / "H100-SXM5-80GB"


def test_shipped_weights_carry_the_transform_cost_they_were_trained_without() -> None:
    # The engine adds back what the metadata says (no constants of its own).
    meta = json.loads((WEIGHTS / "conv.json").read_text())["nchw_transforms"]
    assert meta == json.loads(json.dumps(conv_layout.metadata()))


def test_only_the_16_bit_collection_rows_lose_their_transforms() -> None:
    rows = load_precision_kernels(COLLECTION, {"conv", "conv_bwd_data", "conv_bwd_weight"})["conv"]
    stripped, taken = conv_layout.without_transforms(rows, default_table())
    bf16 = rows.precision == "bf16"
    assert bf16.any() and (~bf16).any()
    assert np.all(taken[~bf16] == 0) and np.array_equal(stripped.latency_us[~bf16], rows.latency_us[~bf16])
    # Each bf16 pass: at least its three fixed kernel costs, never more than 3/4 of the row.
    full = conv_layout.transforms_of_rows(rows, default_table())[bf16]
    assert np.all(full >= conv_layout.TRANSFORMS_PER_PASS * conv_layout.FIXED_US)
    assert np.all(taken[bf16] <= full + 1e-9)
    assert np.all(stripped.latency_us[bf16] >= conv_layout.MIN_REMAINING_SHARE * rows.latency_us[bf16] - 1e-9)


def test_shipped_conv_weights_say_they_are_transform_free() -> None:
    for path in [WEIGHTS / "conv.json", *sorted(WEIGHTS.glob("logo/*/conv.json"))]:
        meta = json.loads(path.read_text())
        assert meta["nchw_transforms"]["fixed_us_per_transform"] == conv_layout.FIXED_US, path
        assert meta["nchw_transforms"]["bandwidth_share"] == conv_layout.BANDWIDTH_SHARE, path


def _conv_backward(op_id: int, channels_last: bool, dtype: str, cin: int = 64) -> dict:
    def t(shape: list[int]) -> dict:
        d: dict = {"shape": shape, "dtype": dtype, "device": "cuda:0"}
        if channels_last:
            _, c, h, w = shape
            d.update(strides=[h * w * c, 1, w * c, c], contiguous=False)
        return d
    x, w, y = [32, cin, 28, 28], [128, cin, 3, 3], [32, 128, 28, 28]
    return {"id": op_id, "name": "aten::convolution_backward", "phase": "backward", "start_us": 0, "wall_us": 10,
            "args": [{"name": "grad_output", "tensor": t(y)}, {"name": "input", "tensor": t(x)},
                     {"name": "weight", "tensor": t(w)}, {"name": "stride", "ints": [1, 1]},
                     {"name": "padding", "ints": [1, 1]}, {"name": "output_mask", "bools": [True, True, False]}],
            "outputs": [t(x), t(w)]}


@pytest.mark.parametrize("gpu", ["H100-SXM5-80GB", "A100-SXM4-80GB"])
def test_nchw_tensor_core_conv_is_channels_last_plus_two_passes_of_transforms(gpu: str) -> None:
    if "nchw_transforms" not in json.loads((WEIGHTS / "conv.json").read_text()):
        pytest.skip("conv weights not trained transform-free")
    dev = default_table().find(gpu)
    shape = {"batch": np.array([32.0]), "cin": np.array([64.0]), "cout": np.array([128.0]),
             "kernel": np.array([3.0]), "size": np.array([28.0]), "stride": np.array([1.0]),
             "padding": np.array([1.0])}
    per_pass = float(conv_layout.transform_us(shape, dev)[0])  # per element: fp32 as bf16
    for dtype in ("bfloat16", "float32"):  # fp32: TF32 (cuDNN's default), 64 and 128 channels
        step = {"index": 0, "wall_ms": 1.0,
                "ops": [_conv_backward(0, False, dtype), _conv_backward(1, True, dtype)]}
        _, rows = engine.forecast_step_parts({"device": "cpu"}, step, [gpu])
        nchw, cl = rows.array["time_us"].ravel()
        assert nchw - cl == pytest.approx(2 * per_pass, rel=1e-6, abs=1e-6), dtype


def test_nchw_tf32_conv_with_unaligned_channels_runs_as_fp32_work_without_transforms() -> None:
    """cuDNN runs such a convolution on NCHW FP32 kernels (the DCGAN traces' 3-channel layers);
    channels-last, the same convolution stays on TF32 tensor cores (ResNet-50's stem)."""
    step = {"index": 0, "wall_ms": 1.0, "ops": [_conv_backward(0, False, "float32", cin=3),
                                                 _conv_backward(1, True, "float32", cin=3),
                                                 _conv_backward(2, False, "float32", cin=64)]}
    parts = _engine.learned_op_parts(json.dumps(engine.trace_document({"device": "cpu"}, [step])), -1)
    assert {op_id: {p for _, _, p, _ in op_parts} for op_id, _, op_parts in parts} == \
        {0: {"fp32"}, 1: {"tf32"}, 2: {"tf32"}}
    shapes = {"cin": np.array([3.0, 64.0, 64.0, 100.0]), "cout": np.array([64.0, 128.0, 1.0, 512.0])}
    assert conv_layout.tf32_on_tensor_cores(shapes).tolist() == [False, True, False, False]


def test_conv_weights_without_the_key_get_no_transforms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights trained on the raw (NCHW) rows already contain the transforms: served as before."""
    for f in WEIGHTS.glob("*.*"):
        if f.suffix in (".json", ".safetensors"):
            (tmp_path / f.name).write_bytes(f.read_bytes())
    meta = json.loads((tmp_path / "conv.json").read_text())
    meta.pop("nchw_transforms", None)
    (tmp_path / "conv.json").write_text(json.dumps(meta))
    monkeypatch.setenv("HABITAT_WEIGHTS", str(tmp_path))
    step = {"index": 0, "wall_ms": 1.0,
            "ops": [_conv_backward(0, False, "bfloat16"), _conv_backward(1, True, "bfloat16")]}
    _, rows = engine.forecast_step_parts({"device": "cpu"}, step, ["H100-SXM5-80GB"])
    nchw, cl = rows.array["time_us"].ravel()
    assert nchw == pytest.approx(cl, rel=1e-12)


def _weights_with_conv_meta(tmp_path: Path, edit) -> Path:
    for f in WEIGHTS.glob("*.*"):
        if f.suffix in (".json", ".safetensors"):
            (tmp_path / f.name).write_bytes(f.read_bytes())
    meta = json.loads((tmp_path / "conv.json").read_text())
    edit(meta["nchw_transforms"])
    (tmp_path / "conv.json").write_text(json.dumps(meta))
    return tmp_path


def test_the_transform_cost_is_the_one_the_weights_were_trained_without(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine reads the transform cost from the conv model's metadata (what the trainer
    took out), so doubling the fixed cost there doubles that part of the NCHW forecast."""
    step = {"index": 0, "wall_ms": 1.0,
            "ops": [_conv_backward(0, False, "bfloat16"), _conv_backward(1, True, "bfloat16")]}
    _, rows = engine.forecast_step_parts({"device": "cpu"}, step, ["H100-SXM5-80GB"])
    nchw, cl = rows.array["time_us"].ravel()
    meta = json.loads((WEIGHTS / "conv.json").read_text())["nchw_transforms"]
    fixed = meta["fixed_us_per_transform"] * meta["transforms_per_pass"]

    def double_fixed(t: dict) -> None:
        t["fixed_us_per_transform"] *= 2

    monkeypatch.setenv("HABITAT_WEIGHTS", str(_weights_with_conv_meta(tmp_path, double_fixed)))
    _, rows = engine.forecast_step_parts({"device": "cpu"}, step, ["H100-SXM5-80GB"])
    nchw2, cl2 = rows.array["time_us"].ravel()
    assert cl2 == pytest.approx(cl, rel=1e-12)
    assert nchw2 - nchw == pytest.approx(2 * fixed, rel=1e-9)  # two passes (both gradients)


def test_a_bad_transform_precision_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def bad(t: dict) -> None:
        t["precisions"] = ["bf17"]

    monkeypatch.setenv("HABITAT_WEIGHTS", str(_weights_with_conv_meta(tmp_path, bad)))
    step = {"index": 0, "wall_ms": 1.0, "ops": [_conv_backward(0, False, "bfloat16")]}
    with pytest.raises(Exception, match="bf17"):
        engine.forecast_step_parts({"device": "cpu"}, step, ["H100-SXM5-80GB"])


def test_older_weights_without_element_bytes_count_each_tensor_at_its_own_width(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """element_bytes (transforms cost per element, fp32 as bf16) is read from the metadata; a
    file without it counts every byte, as the engine did when those weights were written."""
    step = {"index": 0, "wall_ms": 1.0,
            "ops": [_conv_backward(0, False, "float32"), _conv_backward(1, True, "float32")]}
    _, rows = engine.forecast_step_parts({"device": "cpu"}, step, ["H100-SXM5-80GB"])
    per_element = float(np.subtract(*rows.array["time_us"].ravel()))

    def drop(t: dict) -> None:
        t.pop("element_bytes")

    monkeypatch.setenv("HABITAT_WEIGHTS", str(_weights_with_conv_meta(tmp_path, drop)))
    _, rows = engine.forecast_step_parts({"device": "cpu"}, step, ["H100-SXM5-80GB"])
    per_byte = float(np.subtract(*rows.array["time_us"].ravel()))
    fixed = 2 * conv_layout.TRANSFORMS_PER_PASS * conv_layout.FIXED_US
    assert per_byte - fixed == pytest.approx(2 * (per_element - fixed), rel=1e-9)
