"""The eager-PyTorch host model for CPU-traced steps: calibration from GPU traces, its use by
the timeline, and the switch that turns it off."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from habitat.analysis.host_model import calibrate_files, load_document
from habitat.data import engine
from habitat.data.forecast import Forecast

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
TRACES = sorted(RESULTS.glob("h100-sxm5-80gb/traces/dcgan_*.json.gz"))


def _cpu_step() -> dict:
    doc = load_document(TRACES[0])
    doc["origin"]["device"] = "cpu"
    for op in doc["steps"][0]["ops"]:
        op.pop("kernels", None)
    return doc


def test_calibration_reads_host_times_only() -> None:
    model = calibrate_files(TRACES)
    assert model["default_op_us"] > 0 and model["top_level_gap_us"] > 0
    assert "aten::cudnn_convolution" in model["op_us"]
    assert "2 GPU trace(s)" in model["calibration"]
    with pytest.raises(ValueError, match="CPU trace"):
        from habitat.analysis.host_model import calibrate
        calibrate([("cpu", _cpu_step())])


def test_cpu_origin_gets_a_modelled_timeline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(calibrate_files(TRACES)))
    monkeypatch.setenv("HABITAT_HOST_MODEL", str(path))
    step = Forecast.from_trace(_cpu_step(), ["H100"]).latest
    t = step.timeline["H100-SXM5-80GB"]
    assert t["valid"] and t["launch_source"] == "modelled" and t["host_ms"] > 1.0
    assert any("CPU origin" in n for n in t["notes"])
    for off in ("off", ""):  # off: no timeline, step_ms is the kernel sum
        monkeypatch.setenv("HABITAT_HOST_MODEL", off)
        step = Forecast.from_trace(_cpu_step(), ["H100"]).latest
        assert step.timeline["H100-SXM5-80GB"]["valid"] is False
        assert step.step_ms("H100") == step.time_ms("H100")
    monkeypatch.delenv("HABITAT_HOST_MODEL")  # the default: the packaged model
    assert Forecast.from_trace(_cpu_step(), ["H100"]).latest.timeline["H100-SXM5-80GB"]["valid"]
    monkeypatch.setenv("HABITAT_HOST_MODEL", "packaged")
    assert Forecast.from_trace(_cpu_step(), ["H100"]).latest.timeline["H100-SXM5-80GB"]["valid"]


def test_a_bad_host_model_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"default_op_us": -1, "top_level_gap_us": 1}')
    monkeypatch.setenv("HABITAT_HOST_MODEL", str(path))
    # A SettingError naming the variable (not a ValueError, which callers take for the trace's)
    with pytest.raises(engine.SettingError, match="default_op_us must be a number from 0 to 1e6"):
        Forecast.from_trace(_cpu_step(), ["H100"])
    monkeypatch.setenv("HABITAT_HOST_MODEL", str(tmp_path / "missing.json"))
    with pytest.raises(engine.SettingError, match="HABITAT_HOST_MODEL"):
        engine.host_model_json()


def test_packaged_host_model_loads() -> None:
    doc = json.loads(engine.HOST_MODEL_FILE.read_text())
    assert doc["top_level_op_us"] and "8 format-2 GPU trace(s)" in doc["calibration"]
    assert doc["command"].startswith("python -m habitat.analysis.host_model --inclusive")
    assert all(0.5 < t["host_scale"] < 1.0 for t in doc["traces"].values())


LATER = sorted(RESULTS.glob("h100-sxm5-80gb-2026-11-23/traces/dcgan_*.json.gz"))


def test_inclusive_calibration_reads_traces_not_measurements() -> None:
    from habitat.analysis.host_model import calibrate_inclusive

    docs = [(p.name, load_document(p)) for p in LATER]
    model = calibrate_inclusive(docs)
    # The benchmark's measured step is the test, never an input: without it, the same model.
    for _, doc in docs:
        doc.pop("benchmark", None)
    assert calibrate_inclusive(docs) == model
    assert model["top_level_op_us"]["aten::conv2d"] > 10  # a launching op, calibrated and scaled
    assert set(model["phase_gap_us"]) >= {"forward", "backward", "optimizer"}
    assert "aten::_foreach_addcdiv_" in model["foreach_per_tensor_us"]
    assert model["unseen_op_us"]["per_kernel_us"] > 0
    with pytest.raises(ValueError, match="format-2"):
        calibrate_inclusive([("f1", load_document(TRACES[0]))])


def test_host_bound_share_is_printed_for_a_cpu_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HABITAT_HOST_MODEL", raising=False)
    forecast = Forecast.load(RESULTS / "cpu-traces" / "dcgan_bf16.json.gz", targets=["H100"])
    text = str(forecast)
    assert "GPU busy" in text and "bound by" in text and "Host-bound on H100-SXM5-80GB" in text
    assert "CPU origin: the host cadence is a model of eager PyTorch on a GPU machine" in text


def test_op_windows_are_the_timelines_clock() -> None:
    # The calibration reads op times from the engine (no second copy of its corrections):
    # its host scale is the forecast's, and no window starts later than the op did as traced.
    from habitat import _engine

    doc = load_document(sorted(RESULTS.glob("h100-sxm5-80gb-2026-11-23/traces/dcgan_bf16.json.gz"))[0])
    windows = _engine.origin_op_windows(json.dumps(doc), -1)
    step = Forecast.from_trace(doc, ["H100"]).latest
    assert windows["host_scale"] == pytest.approx(step.timeline["H100-SXM5-80GB"]["host_scale"])
    assert windows["host_scale"] < 1.0
    traced = {op["id"]: op["start_us"] for op in doc["steps"][-1]["ops"]}
    assert len(windows["ops"]) == len(traced)
    for op_id, start, end in windows["ops"]:
        assert start <= end and start <= traced[op_id]
    doc["origin"]["device"] = "cpu"
    assert _engine.origin_op_windows(json.dumps(doc), -1)["ops"] == []
