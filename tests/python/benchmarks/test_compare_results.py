"""benchmarks/gpu/compare_results.py: the cross-GPU report's means, overall, per precision and
per direction (a forecast that is high one way and low the other shows in the signed means)."""
from __future__ import annotations

import pytest
from bench_scripts import loaded_script


@pytest.fixture(scope="module")
def cr():
    with loaded_script("benchmarks/gpu/compare_results.py", "compare_results") as module:
        yield module


def _row(model: str, precision: str, a_to_b: float, b_to_a: float) -> dict:
    return {"model": model, "precision": precision,
            "a_to_b": {"forecast_ms": 1 + a_to_b, "measured_ms": 1.0, "error": a_to_b},
            "b_to_a": {"forecast_ms": 1 + b_to_a, "measured_ms": 1.0, "error": b_to_a}}


def test_report_gives_the_mean_of_each_direction(cr) -> None:
    rows = [_row("m", "fp32", -0.02, 0.10), _row("m", "bf16", -0.04, 0.20)]
    text = cr.report("H100 (A) and H200 (B)", rows, recorded=False, against="kernels")
    assert "| m | fp32 | 0.98 | 1.00 | -2.0% | 1.10 | 1.00 | +10.0% |" in text
    assert "Mean absolute error over 4 forecasts: 9.0% (max 20.0%)." in text
    assert "- bf16: 12.0% over 2" in text and "- fp32: 6.0% over 2" in text
    assert "- A->B: 3.0% over 2 (mean signed -3.0%)" in text
    assert "- B->A: 15.0% over 2 (mean signed +15.0%)" in text


def test_the_real_model_runs_of_both_gpus_are_compared(cr) -> None:
    """The committed H100 and H200 runs of the networks built from configs, each GPU's traced
    steps forecast for the other against its kernel sums."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "real-models-gpu"
    header, rows = cr.compare(results / "h100-sxm5-80gb", results / "h200-sxm-141gb", recorded=False,
                              against="kernels")
    assert header == "H100-SXM5-80GB (A) and H200-SXM-141GB (B)"
    assert {(r["model"], r["precision"]) for r in rows} == {
        (m, p) for m in ("mobilenet_v3_large", "vit_b16", "bert_base_mlm", "t5_small") for p in ("fp32", "bf16")}
    for r in rows:
        for d in ("a_to_b", "b_to_a"):
            assert r[d]["measured_ms"] > 0 and abs(r[d]["error"]) < 0.5
