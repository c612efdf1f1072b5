"""benchmarks/accuracy/family_steps.py: a collection row's step made from a template trace (small
prime sizes, rewritten) is the step the CPU records when it runs the row's own case at the row's
sizes, op for op; benchmarks/accuracy/family_kernels.py reads a collection and forecasts it."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import loaded_script, without_run_fields

# One row per kind of template: sizes small enough to trace directly, with equal sizes (channels
# == width), size-1 dims and a strided conv among them.
ROWS = [
    ("bn", "bn", "fwd+bwd", "fp32", {"B": 3, "Input_Channel": 8, "Input_Size": 8, "Layout": "nchw"}),
    ("bn", "bn", "fwd", "bf16", {"B": 2, "Input_Channel": 6, "Input_Size": 5, "Layout": "nhwc"}),
    ("gconv", "gconv", "fwd", "fp32", {"B": 2, "Input_Channel": 12, "Output_Channel": 12, "Kernel_Szie": 3,
                                        "Input_Size": 9, "Stride": 2, "Padding": 1, "Groups": 12, "Layout": "nchw"}),
    ("gconv", "gconv", "bwd_weight", "bf16", {"B": 2, "Input_Channel": 16, "Output_Channel": 16, "Kernel_Szie": 3,
                                               "Input_Size": 8, "Stride": 1, "Padding": 1, "Groups": 4,
                                               "Layout": "nhwc"}),
    ("conv1x1", "conv", "bwd_data", "tf32", {"B": 4, "Input_Channel": 8, "Output_Channel": 24, "Kernel_Szie": 1,
                                              "Input_Size": 8, "Stride": 1, "Padding": 0, "Layout": "nchw"}),
    ("conv3d", "conv3d", "bwd_weight", "fp32", {"B": 2, "Input_Channel": 4, "Output_Channel": 6, "Kernel_Szie": 3,
                                                "Input_Size": 9, "Depth": 5, "Stride": 2, "Padding": 1,
                                                "Layout": "nchw"}),
    ("conv3d", "conv3d", "fwd", "bf16", {"B": 3, "Input_Channel": 8, "Output_Channel": 8, "Kernel_Szie": 3,
                                         "Input_Size": 7, "Depth": 4, "Stride": 1, "Padding": 1, "Layout": "nhwc"}),
    ("sum", "sum", "fwd", "fp32", {"B": 1, "H": 300, "Dim": 0}),
    ("mean", "mean", "fwd", "bf16", {"B": 40, "H": 24, "Dim": 1}),
    ("activation", "hardswish", "bwd", "bf16", {"B": 33, "H": 70}),
    ("embedding", "embedding", "bwd", "fp32", {"Vocab": 50, "Dim": 16, "Tokens": 30}),
    ("crossentropy", "cross_entropy", "fwd+bwd", "fp32", {"Tokens": 12, "Classes": 10}),
]


@pytest.fixture(scope="module")
def fs():
    with loaded_script("benchmarks/accuracy/family_steps.py", "family_steps") as module:
        yield module


@pytest.mark.parametrize("stem,op,phase,precision,shape", ROWS, ids=[f"{r[0]}-{r[2]}-{r[3]}" for r in ROWS])
def test_a_templated_step_is_the_step_traced_at_the_rows_sizes(fs, stem, op, phase, precision, shape) -> None:
    from kernel_case import precision_context

    from habitat.capture.record import record_step

    row = fs.Row(stem, op, phase, precision, shape, 1.0)
    templated = fs.Templates().step_ops(row)
    run = fs._case(row, shape)
    with precision_context(precision), record_step(0) as rec:
        run()
    assert without_run_fields(templated) == without_run_fields(rec.step["ops"])


def test_template_sizes_map_primes_to_the_rows_sizes(fs) -> None:
    row = fs.Row("gconv", "gconv", "fwd", "fp32", {"B": 64, "Input_Channel": 256, "Output_Channel": 256,
                                                   "Kernel_Szie": 3, "Input_Size": 56, "Stride": 2, "Padding": 1,
                                                   "Groups": 8, "Layout": "nchw"}, 1.0)
    shape, mapping = fs.template_sizes(row)
    assert all(p >= 11 for p in mapping)
    assert shape["Input_Channel"] % shape["Groups"] == 0 and shape["Input_Channel"] < 256
    out = fs.conv_output(shape["Input_Size"], row.shape)
    assert mapping[shape["Input_Size"]] == 56 and mapping[out] == fs.conv_output(56, row.shape) == 28
    assert fs._substitute(shape["Input_Channel"] * out * out, mapping) == 256 * 28 * 28


def test_family_kernels_forecasts_a_collection(tmp_path: Path) -> None:
    columns = ["OPName", "Latency", "Device", "Kernel Name", "Precision", "Phase", "Kernel Latency",
               "Transform Latency", "B", "H", "Dim"]
    with open(tmp_path / "sum_fp32.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for b, h, dim, ms in ((4096, 1024, 1, 0.006), (4096, 1024, 0, 0.008), (8, 64, 1, 0.002)):
            w.writerow(["sum", ms * 3, "NVIDIA H100 80GB HBM3", "reduce_kernel", "fp32", "fwd", ms, 0, b, h, dim])
    with loaded_script("benchmarks/accuracy/family_kernels.py", "family_kernels") as fk:
        rows = fk.read_rows(tmp_path)
        assert [r.measured_us for r in rows] == pytest.approx([6.0, 8.0, 2.0])
        pred, methods = fk.forecast(rows, "H100-SXM5-80GB", fk.Templates())
        groups = fk.table(rows, pred, methods)
        # another build's forecasts of the same rows, read back by key: its error beside ours
        (tmp_path / "before.json").write_text(json.dumps(
            [{"key": fk.row_key(r), "measured_us": r.measured_us, "forecast_us": 2 * r.measured_us} for r in rows[:2]]))
        before = fk.before_of(rows, tmp_path / "before.json")
        with_before = fk.table(rows, pred, methods, before)
    assert len(groups) == 1 and groups[0]["rows"] == 3 and groups[0]["op"] == "sum"
    assert all(p > 0 for p in pred)
    assert list(before[:2]) == [12.0, 16.0] and np.isnan(before[2])
    assert with_before[0]["before_mean_abs_pct"] == pytest.approx(100.0)  # the rows it has
    assert "before_mean_abs_pct" not in groups[0]


@pytest.mark.parametrize("shape", [
    {"B": 2, "Input_Channel": 4, "Output_Channel": 6, "Kernel_Szie": 3, "Input_Size": 9, "Depth": 5, "Stride": 2,
     "Padding": 1, "Layout": "nchw"},
    {"B": 3, "Input_Channel": 8, "Output_Channel": 8, "Kernel_Szie": 1, "Input_Size": 7, "Depth": 4, "Stride": 1,
     "Padding": 0, "Layout": "nchw"},
    {"B": 1, "Input_Channel": 3, "Output_Channel": 16, "Kernel_Szie": 3, "Input_Size": 112, "Depth": 16,
     "Stride": 1, "Padding": 1, "Layout": "nchw"}])
def test_a_3d_rows_training_shape_is_the_engines_stand_in(fs, shape) -> None:
    """The conv model trains on a collected 3-D convolution as the square stand-in the engine
    forecasts it by (habitat.learned.neusight.cube_conv_stand_in, conv_geometry.cpp)."""
    import json

    from habitat import _engine
    from habitat.capture.environment import trace_origin
    from habitat.data import engine
    from habitat.learned.neusight import row_shape

    row = fs.Row("conv3d", "conv3d", "fwd", "fp32", shape, 1.0)
    step = {"index": 0, "wall_ms": 1.0, "ops": fs.Templates().step_ops(row)}
    text = json.dumps(engine.trace_document(trace_origin("cpu"), [step]))
    # every op of the wrapper chain (conv3d, convolution, _convolution, ...) names the same part
    parts = {json.dumps(p[1], sort_keys=True) for _, op_class, ps in _engine.learned_op_parts(text, -1)
             if op_class == "conv" for p in ps}
    assert len(parts) == 1
    engine_shape = json.loads(parts.pop())
    ours = row_shape("conv3d", {k: str(v) for k, v in shape.items()}, 4.0)
    for column in ("size", "kernel", "stride", "padding", "batch", "cin", "cout"):
        assert engine_shape[column] == pytest.approx(ours[column], rel=1e-12), column
