"""Multi-precision kernel data (collect_kernels.py's CSVs), its leave-shapes-out split and the
precision features of the GEMM and conv models."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from habitat.learned import features as feats  # noqa: E402
from habitat.learned.devices import default_table  # noqa: E402
from habitat.learned.neusight import load_precision_kernels  # noqa: E402
from habitat.learned.train_precision import leave_shapes_out  # noqa: E402

COLS = ["OPName", "Latency", "Device", "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z",
        "Precision", "Phase"]


def _write(root: Path) -> None:
    with open(root / "bmm_bf16.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS + ["B", "M", "N", "K"])
        for i in range(10):
            w.writerow(["bmm", 0.05, "NVIDIA H100 80GB HBM3", 1, 1, 1, 128, 1, 1, "bf16", "fwd", 2, 64 * (i + 1), 96, 40])
    with open(root / "bmm_fp32.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS + ["B", "M", "N", "K"])
        for i in range(10):
            w.writerow(["bmm", 0.07, "NVIDIA H100 80GB HBM3", 1, 1, 1, 128, 1, 1, "fp32", "fwd", 2, 64 * (i + 1), 96, 40])
    with open(root / "conv_bf16.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS + ["B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"])
        for phase in ("fwd", "bwd_data", "bwd_weight"):
            w.writerow(["conv", 0.1, "NVIDIA H100 80GB HBM3", 1, 1, 1, 128, 1, 1, "bf16", phase, 8, 64, 128, 3, 28, 1, 1])
    (root / "sdpa.csv").write_text("OPName,Device\nsdpa,NVIDIA H100 80GB HBM3\n")  # another layout: skipped


def test_precision_and_pass_columns_are_read(tmp_path: Path) -> None:
    _write(tmp_path)
    data = load_precision_kernels(tmp_path)
    g = data["gemm"]
    assert sorted(set(g.precision.tolist())) == ["bf16", "fp32"]
    assert set(g.shapes["elem_bytes"][g.precision == "bf16"]) == {2.0}
    assert set(g.shapes["elem_bytes"][g.precision == "fp32"]) == {4.0}
    c = data["conv"]
    assert sorted(c.op.tolist()) == ["conv", "conv_bwd_data", "conv_bwd_weight"]
    assert sorted(c.shapes["grad"].tolist()) == [0.0, 1.0, 2.0]


def test_unknown_precision_names_the_file_and_the_choices(tmp_path: Path) -> None:
    with open(tmp_path / "bmm_int4.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS + ["B", "M", "N", "K"])
        w.writerow(["bmm", 0.05, "NVIDIA H100 80GB HBM3", 1, 1, 1, 128, 1, 1, "int4", "fwd", 2, 64, 96, 40])
    with pytest.raises(ValueError, match=r"bmm_int4.csv.*'int4'.*bf16"):
        load_precision_kernels(tmp_path)


def test_a_held_out_shape_is_held_out_in_every_precision_and_pass(tmp_path: Path) -> None:
    _write(tmp_path)
    g = load_precision_kernels(tmp_path)["gemm"]
    test = leave_shapes_out(g, 0.3, seed=0)
    assert 0 < test.sum() < len(g)
    keys = g.problem_keys()
    for k in set(keys[test].tolist()):
        assert test[keys == k].all()  # both precisions of that shape
    np.testing.assert_array_equal(test, leave_shapes_out(g, 0.3, seed=0))  # deterministic
    c = load_precision_kernels(tmp_path)["conv"]
    assert len(set(c.problem_keys().tolist())) == 1  # three passes, one problem


def _gemm(k: float, n: float, eb: float) -> dict[str, np.ndarray]:
    return {"b": np.array([1.0]), "m": np.array([512.0]), "n": np.array([n]), "k": np.array([k]),
            "elem_bytes": np.array([eb])}


def test_precision_features() -> None:
    names = feats.FEATURE_NAMES["gemm"]
    col = {n: i for i, n in enumerate(names)}
    table = default_table()
    a100, v100 = table.find("A100-SXM4-40GB"), table.find("V100-SXM2-16GB")
    x, _ = feats.compute("gemm", _gemm(1024, 768, 2.0), a100, "bf16")
    assert x[0, col["tensor_path"]] == 1.0 and x[0, col["log2_elem_bytes"]] == 1.0
    assert x[0, col["log2_align"]] == 4.0  # 16-byte rows
    x, _ = feats.compute("gemm", _gemm(1024, 768, 2.0), v100, "bf16")  # V100: no BF16 units
    assert x[0, col["tensor_path"]] == 0.0
    x, _ = feats.compute("gemm", _gemm(1000, 767, 2.0), a100, "bf16")  # odd n: 2-byte rows
    assert x[0, col["log2_align"]] == 1.0
    x, _ = feats.compute("gemm", _gemm(1024, 768, 4.0), a100, np.array(["tf32"]))  # per-row precisions
    assert x[0, col["tensor_path"]] == 1.0 and x[0, col["log2_elem_bytes"]] == 2.0
    shapes = {"batch": np.array([8.0]), "cin": np.array([64.0]), "cout": np.array([64.0]), "kernel": np.array([3.0]),
              "size": np.array([28.0]), "stride": np.array([1.0]), "padding": np.array([1.0]),
              "elem_bytes": np.array([2.0]), "grad": np.array([3.0])}
    with pytest.raises(ValueError, match="grad"):
        feats.compute("conv", shapes, a100, "bf16")


def test_measured_harness_floor_adds_to_the_kernel_where_validation_chose_it() -> None:
    """The measured collection's floor (one call between CUDA events) adds to the kernel for the
    families whose validation loss chose p = 1 (conv); NeuSight's rows keep the soft maximum."""
    from habitat.learned.fitting import LAUNCH_FLOOR_US, TrainConfig
    from habitat.learned.model import soft_max
    from habitat.learned.train_precision import MEASURED_SHARPNESS, _additive_floors, _row_sharpness

    cfg = TrainConfig()
    source = np.array(["neusight", "measured:NVIDIA H100 80GB HBM3"], dtype=object)
    assert MEASURED_SHARPNESS["conv"] == 1.0
    assert _row_sharpness("conv", source, cfg).tolist() == [cfg.floor_sharpness, 1.0]
    assert _row_sharpness("gemm", source, cfg).tolist() == [cfg.floor_sharpness, cfg.floor_sharpness]
    floors = {"conv": {"NVIDIA H100 80GB HBM3": 47.0, "Tesla T4": 316.0}}
    gpu = {"NVIDIA H100 80GB HBM3"}
    assert _additive_floors(floors, gpu, 1.0)["conv"] == {"NVIDIA H100 80GB HBM3": 47.0 - LAUNCH_FLOOR_US,
                                                          "Tesla T4": 316.0}
    assert _additive_floors(floors, gpu, 4.0) is floors
    # p = 1: a 20 us kernel behind a 45 us floor is measured at 65 us; p = 4 would say 45.4 us.
    assert soft_max(np.array([45.0]), np.array([20.0]), 1.0)[0] == pytest.approx(65.0)
    assert soft_max(np.array([45.0]), np.array([20.0]), 4.0)[0] == pytest.approx(45.4, abs=0.1)


def test_shipped_models_record_the_harness_they_were_fitted_with() -> None:
    import json

    root = Path(__file__).resolve().parents[3] / "weights"
    conv = json.loads((root / "conv.json").read_text())["harness_floor_us"]
    assert conv["measured_sharpness"] == 1.0 and conv["sharpness"] == 4.0
    for family in ("gemm", "attention"):  # trained before the per-family choice: p = 4 throughout
        harness = json.loads((root / f"{family}.json").read_text())["harness_floor_us"]
        assert harness.get("measured_sharpness", harness["sharpness"]) == 4.0


def test_shipped_gemm_and_conv_fitted_their_measured_floors_per_precision() -> None:
    """gemm and conv fitted the H100 collection's floor per op and precision (FITTED_FLOOR_FAMILIES):
    one floor per key in the metadata, with the estimate they started from; NeuSight's GPUs keep
    theirs (the FP32 key is the op, as before)."""
    import json

    from habitat.learned.train_precision import FITTED_FLOOR_FAMILIES

    root = Path(__file__).resolve().parents[3] / "weights"
    h100 = "NVIDIA H100 80GB HBM3"
    for family, keys in (("gemm", ["bmm", "bmm:bf16", "linear:fp16", "linear:tf32"]),
                         ("conv", ["conv", "conv:bf16", "conv_bwd_data:bf16", "conv_bwd_weight"])):
        assert family in FITTED_FLOOR_FAMILIES
        meta = json.loads((root / f"{family}.json").read_text())
        per_gpu = meta["harness_floor_us"]["per_gpu"]
        for key in keys:
            assert 10.0 < per_gpu[key][h100] < 100.0, (family, key)
            assert f"{key}|{h100}" in meta["fitted_floors"]["start_us"]
        assert "Tesla T4" in per_gpu[keys[0]] and "Tesla T4" not in per_gpu[keys[1]]


def test_selection_split_is_disjoint_from_the_test_split_and_whole_problems(tmp_path: Path) -> None:
    from habitat.learned.train_precision import selection_split

    _write(tmp_path)
    g = load_precision_kernels(tmp_path)["gemm"]
    test = leave_shapes_out(g, 0.3, seed=0)
    sel = selection_split(g, test, 0.5)
    assert sel.any() and not (sel & test).any()
    keys = g.problem_keys()
    for k in set(keys[sel].tolist()):
        assert sel[keys == k].all()
    assert not selection_split(g, test, 0.0).any()


def test_harness_time_splits_the_floor_into_an_added_and_an_overlapped_part() -> None:
    from habitat.learned.model import harness_time, soft_max

    floor, kernel = np.array([30.0, 30.0]), np.array([5.0, 300.0])
    np.testing.assert_allclose(harness_time(floor, kernel, 4.0, 0.0), soft_max(floor, kernel, 4.0))
    np.testing.assert_allclose(harness_time(floor, kernel, 4.0, 1.0), floor + kernel, rtol=1e-9)
    half = harness_time(floor, kernel, 4.0, 0.5)
    assert half[0] == pytest.approx(15.0 + soft_max(np.array([15.0]), np.array([5.0]), 4.0)[0])
    assert half[1] == pytest.approx(315.0, rel=1e-3)  # a long kernel hides the overlapped half
