"""Trace rows (habitat.learned.traces): ops of recorded GPU steps read through the engine's own
learned parts, one measurement per op (a convolution_backward's two passes summed), and the
trainer reading them. (That a fill reads nothing is the engine's:
tests/cpp/learned/test_elementwise_parts.cpp.)"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from habitat.learned import traces as tr  # noqa: E402
from habitat.learned.devices import default_table  # noqa: E402
from habitat.learned.model import load_all  # noqa: E402
from habitat.learned.train import main as train_main  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
RUN = "h100-sxm5-80gb"
TRACE = REPO / "benchmarks" / "results" / RUN / "traces" / "dcgan_fp32.json.gz"


@pytest.mark.skipif(not TRACE.is_file(), reason="recorded H100 traces not in this checkout")
def test_python_forecast_from_the_parts_equals_the_engines() -> None:
    """Every learned op of a recorded trace: the engine's shape-based forecast and the Python one
    from the same parts (the trainer's feature code, the shipped weights) agree, except where the
    engine takes more than the parts (a TF32 pass's faster FP32 path, NCHW transforms, the op's
    own roofline) or less (the dominance envelope: the least forecast over the GPUs the H100
    beats, which for the tiniest ops is another GPU's, at the launch floor)."""
    ops = tr.trace_ops(TRACE, RUN)
    assert len(ops) > 50 and "fill_" in {o.op for o in ops}
    simple = [o for o in ops if all(p[0] in ("elementwise", "softmax", "layernorm") for p in o.parts)]
    models = load_all(REPO / "weights")
    pred = tr.forecast_us(simple, models, default_table())
    engine = np.array([o.engine_us for o in simple])
    same = np.isclose(pred, engine, rtol=1e-5)
    assert same.mean() > 0.6, f"{same.sum()} of {len(same)} ops agree"
    assert np.all(engine[~same] < pred[~same])  # only the envelope lowers a simple op's forecast
    floor = min(m.launch_floor_us for m in models.values())
    assert np.all(engine >= floor * (1 - 1e-9))


def _op(op: str, parts: list, us: float, workload: str = "dcgan", transforms: float = 0.0) -> tr.TraceOp:
    return tr.TraceOp(RUN, "H100-SXM5-80GB", workload, "bf16", op, "conv", parts, us, 0.0, transforms)


def test_a_backward_of_two_passes_is_one_measurement_of_two_rows() -> None:
    shape = {"batch": 8.0, "cin": 64.0, "cout": 64.0, "kernel": 3.0, "size": 28.0, "stride": 1.0, "padding": 1.0,
             "elem_bytes": 2.0}
    fwd = ("conv", dict(shape, grad=0.0), "bf16", 1.0)
    bwd = [("conv", dict(shape, grad=1.0), "bf16", 1.0), ("conv", dict(shape, grad=2.0), "bf16", 1.0)]
    ops = [_op("cudnn_convolution", [fwd], 10.0), _op("cudnn_convolution", [fwd], 12.0),
           _op("convolution_backward", bwd, 30.0), _op("add", [("elementwise", {"n": 1.0}, "fp32", 1.0)], 2.0)]
    rows = tr.training_rows(ops, "conv")
    assert rows is not None and len(rows.rows) == 3  # the forward once (two occurrences), the backward's two passes
    assert len(set(rows.measurement.tolist())) == 2
    fwd_row = rows.rows.shapes["grad"] == 0.0
    assert rows.rows.latency_us[fwd_row][0] == 11.0  # the median of its occurrences
    np.testing.assert_array_equal(rows.rows.latency_us[~fwd_row], [30.0, 30.0])  # the pair's measured sum
    assert set(rows.rows.timing) == {"device"} and set(rows.rows.precision) == {"bf16"}
    assert tr.training_rows(ops, "gemm") is None


def test_a_pass_trains_without_its_layout_transforms() -> None:
    """An NCHW bf16 pass ran between cuDNN's layout transforms; the engine adds them to the
    learned pass (conv_transform_us), so the row is the pass alone, as a collection's is."""
    shape = {"batch": 128.0, "cin": 64.0, "cout": 128.0, "kernel": 4.0, "size": 32.0, "stride": 2.0, "padding": 1.0,
             "elem_bytes": 2.0, "nchw": 1.0, "grad": 0.0}
    rows = tr.training_rows([_op("cudnn_convolution", [("conv", shape, "bf16", 1.0)], 45.2, transforms=22.8)], "conv")
    assert rows is not None
    np.testing.assert_allclose(rows.rows.latency_us, [22.4])
    op = {"kernels": [{"name": "void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>", "duration_us": 9.0},
                      {"name": "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32", "duration_us": 22.4},
                      {"name": "_Z22tensorTransformGenericI13__nv_bfloat16", "duration_us": 4.0}]}
    assert tr.kernel_us(op) == pytest.approx(35.4)
    assert tr.kernel_us(op, transforms=True) == pytest.approx(13.0)
    assert tr.kernel_us(op, transforms=False) == pytest.approx(22.4)


@pytest.mark.skipif(not TRACE.is_file(), reason="recorded H100 traces not in this checkout")
def test_recorded_bf16_nchw_convolutions_carry_their_transforms() -> None:
    bf16 = TRACE.with_name("dcgan_bf16.json.gz")
    if not bf16.is_file():
        pytest.skip("no recorded DCGAN bf16 trace")
    convs = [o for o in tr.trace_ops(bf16, RUN) if o.op_class == "conv"]
    assert convs and all(0 < o.transform_us < o.measured_us for o in convs)


@pytest.mark.skipif(not TRACE.is_file(), reason="recorded H100 traces not in this checkout")
def test_cli_trains_on_the_recorded_steps(tmp_path: Path) -> None:
    out = tmp_path / "w"
    rc = train_main(["--traces", str(REPO / "benchmarks" / "results"), "--runs", RUN, "--families", "softmax",
                     "--quick", "--no-logo", "--out", str(out)])
    assert rc == 0
    meta = json.loads((out / "softmax.json").read_text())
    assert meta["training_data"]["sources"]["traces"] > 0
    assert set(meta["training_data"]["workloads"]) <= set(tr.WORKLOADS)
    assert meta["split"]["rule"].startswith("no device-time collection")
