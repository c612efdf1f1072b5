"""benchmarks/timeline/first_step.py (issue 31's GPU measurement) without a GPU: a tiny model
through the whole script on the CPU, the table, and the CUPTI record setting it sets and
restores. The measurement itself needs a CUDA GPU (bash benchmarks/gpu/run.sh first-step)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from bench_scripts import loaded_script

from habitat import _C


@pytest.fixture(scope="module")
def first_step():
    saved = sys.modules.pop("models", None)  # the script imports benchmarks/gpu/models.py by that name
    try:
        with loaded_script("benchmarks/timeline/first_step.py", "bench_first_step") as module:
            yield module
    finally:
        sys.modules.pop("models", None)
        if saved is not None:
            sys.modules["models"] = saved


def test_the_script_runs_end_to_end_on_a_cpu(first_step, tmp_path: Path) -> None:
    assert first_step.main(["--device", "cpu", "--smoke", "--workloads", "t5_small", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "first-step.json").read_text())
    (row,) = doc["rows"]
    assert row["workload"] == "t5_small" and row["api_records"] == "all"
    assert len(row["detailed"]) == 2 and row["untraced_ms"] > 0
    assert row["step_counts"]["detailed"] == 2
    table = (tmp_path / "first-step.md").read_text()
    assert "| t5_small | fp32 | all |" in table
    # The second detailed step is kept for a CPU replay, with the untraced time measured.
    trace = tmp_path / "traces" / "t5_small_fp32.json.gz"
    import gzip

    with gzip.open(trace, "rt") as f:
        saved = json.load(f)
    assert saved["benchmark"]["measured"]["median_ms"] == pytest.approx(row["untraced_ms"])


def test_the_second_detailed_step_is_saved_although_later_steps_push_it_out(first_step, tmp_path: Path,
                                                                            monkeypatch) -> None:
    # On a GPU the 24 steady-state steps outnumber the steps whose detail predict_on keeps
    # (2026-11-27: no trace was saved); keeping one step makes the CPU run show the same.
    predict_on = first_step.habitat.predict_on
    monkeypatch.setattr(first_step.habitat, "predict_on", lambda targets: predict_on(targets, keep_steps=1))
    assert first_step.main(["--device", "cpu", "--smoke", "--workloads", "t5_small", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "traces" / "t5_small_fp32.json.gz").is_file()


def test_the_record_setting_is_restored_and_the_cost_measured_again(first_step, monkeypatch) -> None:
    monkeypatch.delenv("HABITAT_CUPTI_API_RECORDS", raising=False)
    _C.cupti_set_launch_overhead(3.0)
    with first_step.ApiRecords("launches"):
        assert os.environ["HABITAT_CUPTI_API_RECORDS"] == "launches"
        assert _C.cupti_launch_overhead() is None  # measured again at the next traced step
    assert "HABITAT_CUPTI_API_RECORDS" not in os.environ
    assert _C.cupti_launch_overhead() is None


def test_errors_and_options(first_step) -> None:
    table = first_step.markdown([{"workload": "bert_base", "precision": "bf16", "api_records": "launches",
                                  "error": "RuntimeError: boom"}], "# t")
    assert "| bert_base | bf16 | launches | error: RuntimeError: boom |" in table
    args = first_step.parse_args(["--out", "x", "--cupti-api-records", "both"])
    assert args.cupti_api_records == "both" and args.bursts == 5 and args.burst == 10
    with pytest.raises(SystemExit):
        first_step.parse_args(["--out", "x", "--cupti-api-records", "some"])
