"""The collection rows of the families a training step runs besides matrices (batch norm, sum and
mean, log_softmax) as the learned models read them, and the measured-roofline table's rules for
entries fitted on one problem or on one op."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from habitat.learned import family_table
from habitat.learned import roofline_table as rt
from habitat.learned.neusight import load_batchnorm, load_precision_kernels, problem_key, row_shape
from habitat.learned.train import main as train_main

H100 = "NVIDIA H100 80GB HBM3"
COLS = ["OPName", "Latency", "Device", "Grid x", "Grid y", "Grid z", "Precision", "Phase", "Kernel Latency",
        "Transform Latency"]


def _write_bn(root: Path, n: int = 12) -> None:
    with open(root / "bn_bf16.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS + ["B", "Input_Channel", "Input_Size", "Layout"])
        for i in range(n):
            for layout in ("nchw", "nhwc"):
                fwd = 0.01 * (i + 1)
                w.writerow(["bn", fwd * 2, H100, 1, 1, 1, "bf16", "fwd", fwd, 0, 8 * (i + 1), 64, 14, layout])
                both = fwd * 3 if i else fwd * 1.1  # the first: a backward lost in the jitter
                w.writerow(["bn", both * 2, H100, 1, 1, 1, "bf16", "fwd+bwd", both, 0, 8 * (i + 1), 64, 14, layout])


def test_batch_norm_backward_is_fwd_and_bwd_less_fwd(tmp_path: Path) -> None:
    _write_bn(tmp_path)
    rows = load_batchnorm(tmp_path)
    assert rows is not None
    fwd, bwd = rows.op == "bn", rows.op == "bn_bwd"
    assert fwd.sum() == 24 and bwd.sum() == 22  # the backward under a fifth of fwd+bwd is dropped
    key = list(zip(rows.shapes["count"], rows.shapes["channels_last"]))
    forward = {k: t for k, t, f in zip(key, rows.latency_us, fwd) if f}
    for k, t, b in zip(key, rows.latency_us, bwd):
        if b:
            assert t == pytest.approx(2 * forward[k])
    assert set(rows.shapes["channels_last"]) == {0.0, 1.0} and set(rows.shapes["elem_bytes"]) == {2.0}
    assert 8 * 14 * 14 in set(rows.shapes["count"]) and set(rows.shapes["channels"]) == {64.0}
    # both layouts and both passes of a problem are one problem (held out together)
    assert len(set(rows.problem_keys())) == 12


def test_reductions_and_log_softmax_rows_have_their_family_shapes() -> None:
    column = row_shape("sum", {"B": "4096", "H": "512", "Dim": "0"}, 4.0)
    assert column == {"rows": 512.0, "cols": 4096.0, "elem_bytes": 4.0, "strided": 1.0}
    assert row_shape("mean", {"B": "4096", "H": "512", "Dim": "1"}, 2.0)["strided"] == 0.0
    assert row_shape("log_softmax_bwd", {"Tokens": "2048", "Classes": "32000"}, 2.0) == {
        "rows": 2048.0, "cols": 32000.0, "elem_bytes": 2.0, "backward": 1.0, "log": 1.0}
    assert row_shape("softmax_bwd", {"B": "2048", "H": "512"}, 4.0)["log"] == 0.0
    assert problem_key("log_softmax_bwd", {"rows": 2048, "cols": 32000, "elem_bytes": 2, "backward": 1}) == \
        "log_softmax|2048|32000"


def test_a_reduction_model_trains_on_a_collection(tmp_path: Path) -> None:
    with open(tmp_path / "sum_fp32.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS + ["B", "H", "Dim"])
        for i in range(40):
            for dim in (0, 1):
                w.writerow(["sum", 0.02, H100, 1, 1, 1, "fp32", "fwd", 0.002 * (i + 1), 0, 64 * (i + 1), 256, dim])
    assert set(load_precision_kernels(tmp_path, timing="kernel")) == {"reduction"}
    out = tmp_path / "w"
    assert train_main(["--quick", "--no-logo", "--families", "reduction", "--collections", str(tmp_path),
                       "--out", str(out)]) == 0
    meta = json.loads((out / "reduction.json").read_text())
    assert meta["split"]["collections"] == [f"collection:{tmp_path.name}"] and meta["split"]["test_problems"] == 16


def _sample(op: str, roofline_us: float, measured_us: float, workload: str = "w") -> rt.Sample:
    return rt.Sample(workload, "H100", op, "copy", 4, False, roofline_us, 1, measured_us)


def test_one_problem_gets_a_fixed_part_when_latency_bound_else_an_efficiency() -> None:
    tiny = rt.fit_entry([_sample("cat", 0.01, 10.4), _sample("cat", 0.01, 10.5)])
    assert tiny["efficiency"] == 1.0 and tiny["fixed_us"] == pytest.approx(10.4, rel=0.1)
    large = rt.fit_entry([_sample("dw", 600.0, 1500.0), _sample("dw", 600.0, 1450.0)])
    assert large["fixed_us"] == 0.0 and large["efficiency"] == pytest.approx(0.41, rel=0.08)
    spread = rt.fit_entry([_sample("x", r, 5.0 + r / 0.5) for r in (1.0, 10.0, 100.0, 1000.0)])
    assert spread["fixed_us"] == pytest.approx(5.0, rel=0.15) and spread["efficiency"] == pytest.approx(0.5, rel=0.08)


def test_an_entry_is_sm_bound_only_where_two_gpus_say_its_time_does_not_follow_bandwidth() -> None:
    from habitat.learned.devices import default_table
    from habitat.learned.roofline_sample import roofline_us, sm_roofline_us

    h100, h200 = default_table().find("H100-SXM5-80GB"), default_table().find("H200-SXM-141GB")

    def sample(dev, nbytes: float, measured_us: float) -> rt.Sample:
        return rt.Sample("w", dev.name, "dw", "conv", 4, False, roofline_us(dev, "fp32", 0.0, nbytes), 1,
                         measured_us, sm_roofline_us(dev, "fp32", 0.0, nbytes))

    sizes = (1e7, 1e8, 1e9)
    # the same time on both GPUs (as depthwise convolutions measure): bound on the SM side
    same = rt.fit_entry([sample(d, b, b / 1e6) for d in (h100, h200) for b in sizes])
    assert same.get("bound") == "sm"
    forecast = [rt.forecast_us({"ops": {"dw": same}, "classes": {}}, sample(d, 1e8, 0.0), 1.0) for d in (h100, h200)]
    assert forecast[0] == pytest.approx(forecast[1]) == pytest.approx(100.0, rel=0.1)
    # time that follows DRAM bandwidth: the DRAM roofline, as before
    dram = rt.fit_entry([sample(d, b, 2 * b / (d.bandwidth_gbs * 1e3)) for d in (h100, h200) for b in sizes])
    assert "bound" not in dram and dram["efficiency"] == pytest.approx(0.5, rel=0.08)
    # one GPU cannot tell the two apart
    assert "bound" not in rt.fit_entry([sample(h100, b, b / 1e6) for b in sizes])


def test_a_depthwise_samples_filter_size_and_stride_key_it_first() -> None:
    x = rt.Sample("collection", "H100", "depthwise_conv2d", "conv", 4, True, 10.0, 1, 20.0, variant="k7s1")
    assert rt.keys(x) == ("depthwise_conv2d:k7s1|4|cl", "depthwise_conv2d:k7s1|4", "depthwise_conv2d:k7s1",
                          "depthwise_conv2d|4|cl", "depthwise_conv2d|4", "depthwise_conv2d")
    table = {"ops": {"depthwise_conv2d|4": {"fixed_us": 0.0, "efficiency": 0.5}}, "classes": {}}
    assert rt.forecast_us(table, x, 1.0) == pytest.approx(20.0)


def test_a_class_entry_needs_two_ops_not_an_op_and_its_backward() -> None:
    pool = [_sample("max_pool2d", r, 3 * r) for r in (10.0, 20.0)] + \
           [_sample("max_pool2d_backward", r, 5 * r) for r in (10.0, 20.0)]
    assert "copy" not in rt.fit(pool)["classes"]
    assert "copy" in rt.fit(pool + [_sample("cat", r, 2 * r) for r in (10.0, 20.0)])["classes"]


def test_the_tables_held_out_problems_are_a_stable_fifth() -> None:
    shapes = [{"Tokens": t, "Classes": c} for t in range(1, 41) for c in (10, 1000, 32000)]
    held = [family_table.held_out("crossentropy", s) for s in shapes]
    assert held == [family_table.held_out("crossentropy", s) for s in shapes]
    assert 0.1 < np.mean(held) < 0.3
    # the layout is a variant of the problem, not another problem
    assert family_table.held_out("gconv", {"B": 2, "Layout": "nchw"}) == \
        family_table.held_out("gconv", {"B": 2, "Layout": "nhwc"})
