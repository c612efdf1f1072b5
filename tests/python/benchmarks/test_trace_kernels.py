"""benchmarks/accuracy/trace_kernels.py on one committed H100 trace: its rows are the ops that
launched kernels, measured from those kernels, forecast on the shape path."""
from __future__ import annotations

import math

import pytest
from bench_scripts import loaded_script

TRACE = "h100-sxm5-80gb/traces/dcgan_fp32.json.gz"


@pytest.fixture(scope="module")
def tk():
    with loaded_script("benchmarks/accuracy/trace_kernels.py", "trace_kernels") as module:
        yield module


@pytest.fixture(scope="module")
def rows(tk):
    return tk.trace_rows(tk.RESULTS / TRACE, "h100-sxm5-80gb")


def test_rows_are_the_ops_with_kernels_measured_by_their_kernel_sums(tk, rows) -> None:
    from habitat.analysis.host_model import load_document

    step = load_document(tk.RESULTS / TRACE)["steps"][0]
    with_kernels = {op["id"]: op for op in step["ops"] if op.get("kernels")}
    assert [r["op_id"] for r in rows] == list(with_kernels)
    assert all(r["gpu"] == "H100-SXM5-80GB" and r["workload"] == "dcgan"
               and r["precision"] == "fp32" for r in rows)
    # measured = the sum of the op's own kernels' durations, checked by hand on a few ops
    checked = 0
    for r in rows[:: max(1, len(rows) // 8)]:
        op = with_kernels[r["op_id"]]
        total = 0.0
        for k in op["kernels"]:
            total += k["duration_us"]
        assert r["measured_us"] == pytest.approx(total, abs=0.005)
        assert r["kernels"] == len(op["kernels"])
        assert r["measured_incl_us"] >= r["measured_us"]
        checked += 1
    assert checked >= 5


def test_every_row_has_a_class_and_a_shape_based_forecast(tk, rows) -> None:
    classes = {r["op_class"] for r in rows}
    assert all(r["op_class"] for r in rows)
    assert {"conv", "batch_norm", "elementwise"} <= classes
    assert all(r["forecast_us"] > 0 and math.isfinite(r["forecast_us"]) for r in rows)
    # kernels stripped: no forecast comes from scaling the measured ones
    assert not {r["method"] for r in rows} & {"wave_scaling", "learned_ratio", "roofline_ratio"}


def test_summary_covers_each_class_once_per_gpu_and_precision(tk, rows) -> None:
    summary = tk.summarize(rows)
    keys = [(s["family"], s["gpu"], s["precision"]) for s in summary]
    assert len(keys) == len(set(keys))
    assert sum(s["rows"] for s in summary) == sum(r["measured_incl_us"] > 0 for r in rows)
    assert all(s["rows_5us"] <= s["rows"] for s in summary)
