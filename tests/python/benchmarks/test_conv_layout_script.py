"""benchmarks/accuracy/conv_layout.py --collection: the TF32 channel rule and the transform cost
checked against a kernel collection's NCHW conv rows (here three hand-written rows)."""
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


def _write(path: Path, rows: list[tuple[int, int, str, float]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for cin, cout, layout, transform_ms in rows:
            w.writerow(["conv", 0.1, "NVIDIA H100 80GB HBM3", "tf32", "fwd", 8, cin, cout, 3, 32, 1, 1, layout,
                        0.09, transform_ms])


def test_rows_are_the_nchw_passes_with_the_rule_and_the_measured_transforms(cl, tmp_path: Path) -> None:
    _write(tmp_path / "conv_tf32.csv", [(64, 128, "nchw", 0.02), (3, 64, "nchw", 0.0), (64, 128, "nhwc", 0.0)])
    rows = cl.collection_rows(tmp_path)["tf32"]
    assert [(r["rule_transforms"], r["transform_us"]) for r in rows] == [(True, pytest.approx(20.0)),
                                                                          (False, 0.0)]
    assert cl.check_collection(tmp_path) == 0


def test_a_collection_without_device_times_is_named(cl, tmp_path: Path, capsys) -> None:
    assert cl.check_collection(tmp_path) == 1
    assert "Transform Latency" in capsys.readouterr().out
