"""benchmarks/accuracy/conv_layout.py --collection: the transform cost fitted and checked, and the
path rule, against a kernel collection's conv rows (here a few hand-written rows)."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest
from bench_scripts import loaded_script

COLUMNS = ["OPName", "Latency", "Device", "Precision", "Phase", "B", "Input_Channel", "Output_Channel",
           "Kernel_Szie", "Input_Size", "Stride", "Padding", "Layout", "Kernel Latency", "Transform Latency"]


@pytest.fixture(scope="module")
def cl():
    with loaded_script("benchmarks/accuracy/conv_layout.py", "conv_layout_script") as module:
        yield module


def _write(path: Path, precision: str, rows: list[tuple[int, int, str, float, float]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for cin, cout, layout, kernel_ms, transform_ms in rows:
            w.writerow(["conv", 0.1, "NVIDIA H100 80GB HBM3", precision, "fwd", 8, cin, cout, 3, 32, 1, 1, layout,
                        kernel_ms, transform_ms])


def test_the_transform_cost_is_fitted_and_the_path_rule_checked(cl, tmp_path: Path, capsys) -> None:
    # a shape whose TF32 NCHW pass transformed (tensor cores) and one that ran FP32 NCHW kernels
    _write(tmp_path / "conv_tf32.csv", "tf32", [(64, 128, "nchw", 0.09, 0.02), (64, 128, "nhwc", 0.07, 0.0),
                                                 (3, 64, "nchw", 0.01, 0.0), (3, 64, "nhwc", 0.03, 0.0)])
    _write(tmp_path / "conv_fp32.csv", "fp32", [(64, 128, "nchw", 0.20, 0.0), (3, 64, "nchw", 0.01, 0.0)])
    rows = cl.collection_rows(tmp_path)
    assert {(r["precision"], r["layout"]) for r in rows} == {("tf32", "nchw"), ("tf32", "nhwc"), ("fp32", "nchw")}
    assert cl.check_collection(tmp_path) == 0
    out = capsys.readouterr().out
    assert "fitted on the 1 NCHW passes" in out
    assert "| tf32 | 2 | 2 |" in out  # both paths named by the faster measured alternative


def test_a_collection_without_device_times_is_named(cl, tmp_path: Path, capsys) -> None:
    assert cl.check_collection(tmp_path) == 1
    assert "Transform Latency" in capsys.readouterr().out
