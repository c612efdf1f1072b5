"""Kernel collections (collect_kernels.py's CSVs): precision, pass and timing columns, the path
a row's kernels ran on, the leave-shapes-out split, the precision features, the sources of a
family and the trainer end to end on a synthetic collection."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from habitat.learned import features as feats  # noqa: E402
from habitat.learned import harness, kernel_paths  # noqa: E402
from habitat.learned import sources as src  # noqa: E402
from habitat.learned.devices import default_table  # noqa: E402
from habitat.learned.fitting import source_weights  # noqa: E402
from habitat.learned.neusight import load_attention, load_precision_kernels  # noqa: E402
from habitat.learned.train import SHARES, batch_shares, leave_shapes_out  # noqa: E402
from habitat.learned.train import main as train_main  # noqa: E402

COLS = ["OPName", "Latency", "Device", "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z",
        "Precision", "Phase"]
H100 = "NVIDIA H100 80GB HBM3"
SIMT = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_ffma_execute_kernel__5x_cublas"
TENSOR = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"


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


def _conv_rows(root: Path, problems: list[tuple[str, int, int]]) -> None:
    """conv and gconv rows (op, channels, groups), each a forward pass in bf16."""
    with open(root / "conv_bf16.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS + ["B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride",
                           "Padding", "Groups"])
        for i, (op, channels, groups) in enumerate(problems):
            w.writerow([op, 0.1, H100, 1, 1, 1, 128, 1, 1, "bf16", "fwd", 8 + i, channels, channels, 3, 28, 1, 1,
                        groups])


def test_grouped_rows_are_drawn_apart_and_leave_the_dense_split_as_it_was(tmp_path: Path) -> None:
    dense = [("conv", 64, 1)] * 20
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _conv_rows(tmp_path / "a", dense)
    # grouped rows added; a depthwise one (groups == channels) is the roofline table's, not read
    _conv_rows(tmp_path / "b", dense + [("gconv", 64, 4)] * 10 + [("gconv", 64, 64)])
    before, after = load_precision_kernels(tmp_path / "a")["conv"], load_precision_kernels(tmp_path / "b")["conv"]
    assert len(after) == 30 and set(after.shapes["groups"][after.op == "gconv"]) == {4.0}
    # a dense problem's key is as it was before the groups column existed
    assert before.problem_keys()[0] == "conv|8|64|64|3|28|1|1"
    assert after.problem_keys()[20] == "gconv|28|64|64|3|28|1|1|4"
    held_before, held_after = leave_shapes_out(before), leave_shapes_out(after)
    np.testing.assert_array_equal(held_after[:20], held_before)
    assert held_after[20:].sum() == 2  # a fifth of the grouped problems, drawn on their own


def test_a_grouped_conv_is_one_groups_problem_with_the_whole_weight() -> None:
    names = feats.FEATURE_NAMES["conv"]
    col = {n: i for i, n in enumerate(names)}
    h100 = default_table().find("H100-SXM5-80GB")
    shape = {"batch": 8.0, "cin": 256.0, "cout": 512.0, "kernel": 3.0, "size": 28.0, "stride": 1.0,
             "padding": 1.0, "elem_bytes": 2.0, "grad": 0.0}
    def of(**changes: float):
        return feats.compute("conv", {c: np.array([v]) for c, v in {**shape, **changes}.items()}, h100, "bf16")
    x, t = of(groups=32.0)
    assert x[0, col["log2_groups"]] == 5.0
    assert x[0, col["log2_cin"]] == 3.0 and x[0, col["log2_cout"]] == 4.0  # 8 -> 16 channels a group
    flops, nbytes = feats.work("conv", {c: np.array([v]) for c, v in {**shape, "groups": 32.0}.items()})
    assert flops[0] == 2.0 * 8 * 28 * 28 * 512 * 8 * 9  # a 32nd of the dense convolution's
    assert nbytes[0] == 2.0 * (8 * 256 * 28 * 28 + 512 * 8 * 9 + 8 * 512 * 28 * 28)
    x1, _ = of(groups=1.0)
    assert x1[0, col["log2_groups"]] == 0.0 and x1[0, col["log2_cin"]] == 8.0
    with pytest.raises(ValueError, match="groups"):
        of(groups=3.0)  # divides neither 256 nor 512


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



def test_a_tf32_row_that_ran_fp32_simt_kernels_is_an_fp32_row() -> None:
    assert kernel_paths.path_precision("tf32", ";" + SIMT) == "fp32"
    assert kernel_paths.path_precision("tf32", ";" + TENSOR) == "tf32"
    # cuDNN's layout transforms around a tensor-core pass say nothing about its units
    transforms = ";void cudnn::engines_precompiled::nchwToNhwcKernel<float>();" + TENSOR
    assert kernel_paths.path_precision("tf32", transforms) == "tf32" and kernel_paths.ran_transforms(transforms)
    # nor does a memset the library runs before a split-K SIMT pass (CUPTI's memset record)
    assert kernel_paths.path_precision("tf32", ";Memset (Device);" + SIMT) == "fp32"
    assert kernel_paths.path_precision("bf16", ";" + SIMT) == "bf16"  # 16-bit rows keep theirs
    assert kernel_paths.path_precision("tf32", "") == "tf32"


def _write_device_time(root: Path, n: int = 30) -> None:
    """A collection with both timings: Latency = Kernel Latency + a 20 us floor."""
    cols = COLS + ["Kernels", "Kernel Latency", "Transform Latency", "B", "M", "N", "K"]
    for prec in ("bf16", "tf32"):
        with open(root / f"bmm_{prec}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for i in range(n):
                k = 0.004 * (i + 1)
                kernel = SIMT if prec == "tf32" and i % 5 == 0 else TENSOR
                w.writerow(["bmm", k + 0.020, H100, 1, 1, 1, 128, 1, 1, prec, "fwd", ";" + kernel, k, 0.0,
                            2, 64 * (i + 1), 96 + 8 * i, 40 + 8 * i])


def test_device_time_rows_carry_their_timing_and_path(tmp_path: Path) -> None:
    _write_device_time(tmp_path)
    device = load_precision_kernels(tmp_path, timing="kernel")["gemm"]
    call = load_precision_kernels(tmp_path, timing="call")["gemm"]
    assert set(device.timing) == {"device"} and set(call.timing) == {"call"}
    np.testing.assert_allclose(call.latency_us - device.latency_us, 20.0)
    # every fifth tf32 row ran FP32 SIMT kernels: an fp32 row
    tf32_rows = (device.shapes["elem_bytes"] == 4.0)
    assert (device.precision[tf32_rows] == "fp32").sum() == 6 and (device.precision == "tf32").sum() == 24
    assert src.has_device_time(tmp_path)


def test_sources_key_a_call_row_by_its_floor_and_a_device_row_by_none(tmp_path: Path) -> None:
    _write_device_time(tmp_path)
    s = src.collection(tmp_path, "gemm", default_table())
    assert s is not None and set(s.floor_key) == {""}  # device time: no floor
    assert len(set(s.measurement)) == len(s.rows)
    rows = load_precision_kernels(tmp_path, timing="call")["gemm"]
    keys = src._floor_keys("collection:x", rows, ("op", "precision"))
    assert set(keys) == {"collection:x|bmm|bf16", "collection:x|bmm|tf32", "collection:x|bmm|fp32"}


def test_sdpa_backward_is_device_time_only_where_its_kernels_were_recorded(tmp_path: Path) -> None:
    cols = ["OPName", "Latency", "Device", "Precision", "Phase", "Kernel Latency", "Transform Latency", "Kernels",
            "B", "H", "L", "S", "E", "Causal", "Backend"]
    with open(tmp_path / "sdpa_bf16.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for backend in ("flash", "cudnn", "math"):
            w.writerow(["sdpa", 0.40, H100, "bf16", "fwd", 0.35, 0.0, "fwd_k", 4, 8, 512, 512, 64, 0, backend])
            # the fwd+bwd Kernel Latency holds the forward's kernels only (the 2026-11-26 defect)
            w.writerow(["sdpa", 1.90, H100, "bf16", "fwd+bwd", 0.35, 0.0, "fwd_k", 4, 8, 512, 512, 64, 0, backend])
            # a later collection: the backward's kernels are in the fwd+bwd row
            w.writerow(["sdpa", 0.40, H100, "bf16", "fwd", 0.35, 0.0, "fwd_k", 4, 8, 256, 256, 64, 0, backend])
            w.writerow(["sdpa", 1.90, H100, "bf16", "fwd+bwd", 1.25, 0.0, "fwd_k;dq_k;bwd_k", 4, 8, 256, 256, 64, 0,
                        backend])
    a = load_attention(tmp_path, "kernel")
    assert sorted(a.shapes["backend"].tolist()) == [0.0] * 4 + [2.0] * 4  # flash, cuDNN; math is not a fused kernel
    fwd, bwd = a.op == "sdpa", a.op == "sdpa_bwd"
    lost, kept = a.shapes["l"] == 512, a.shapes["l"] == 256
    assert set(a.timing[fwd]) == {"device"} and set(a.timing[bwd & lost]) == {"call"}
    assert set(a.timing[bwd & kept]) == {"device"}
    np.testing.assert_allclose(a.latency_us[fwd], 350.0)
    np.testing.assert_allclose(a.latency_us[bwd & lost], 1900.0 - 350.0)  # fwd+bwd per call less the forward's device time
    np.testing.assert_allclose(a.latency_us[bwd & kept], 1250.0 - 350.0)  # both device times
    assert len(set(a.problem_keys().tolist())) == 2  # every backend and pass of a shape: one problem


def test_a_balanced_family_gives_each_collection_an_equal_share_of_the_draws() -> None:
    source = np.array(["collection:big"] * 90 + ["collection:small"] * 10 + [src.TRACES] * 20, dtype=object)
    kinds, shares = batch_shares("attention", source)
    w = source_weights(kinds, shares)
    big, small, traced = (w[source == s].sum() for s in ("collection:big", "collection:small", src.TRACES))
    total = SHARES["collection"] + SHARES[src.TRACES]
    assert big == pytest.approx(small) == pytest.approx(SHARES["collection"] / 2 / total)
    assert traced == pytest.approx(SHARES[src.TRACES] / total)
    # other families draw the collections' share by rows
    kinds, shares = batch_shares("gemm", source)
    w = source_weights(kinds, shares)
    assert w[source == "collection:big"].sum() == pytest.approx(9 * w[source == "collection:small"].sum())


def test_harness_time_is_additive_with_a_larger_share_for_tiny_kernels() -> None:
    k = np.array([0.0, harness.KNEE_US, 1e6])
    t = harness.harness_time("gemm", np.full(3, 10.0), k)
    r = harness.SHAPE_RATIO["gemm"]
    np.testing.assert_allclose(t - k, [10.0 * (1 + r), 10.0 * (1 + r / 2), 10.0 * (1 + r / (1 + 2e5))])
    np.testing.assert_allclose(harness.harness_time("softmax", np.full(3, 10.0), k) - k, 10.0)  # r = 0


def test_cli_trains_on_a_collection_and_holds_its_split_out(tmp_path: Path) -> None:
    data = tmp_path / "kernels"
    data.mkdir()
    _write_device_time(data)
    out = tmp_path / "w"
    assert train_main(["--quick", "--no-logo", "--families", "gemm", "--collections", str(data), "--out", str(out)]) == 0
    import json
    meta = json.loads((out / "gemm.json").read_text())
    assert meta["split"]["collection"] == "collection:kernels" and meta["split"]["test_problems"] == 6
    assert set(meta["validation_error_pct"]["held_out_shapes"]) <= {"bf16", "tf32", "fp32"}
    assert meta["training_data"]["sources"] == {"collection:kernels": 48}
    assert meta["training_command"].startswith("python -m habitat.learned.train")
