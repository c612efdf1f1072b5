"""The host-aware step time (timeline) in the forecast's data, print(forecast), compare, the
report and TensorBoard, on a recorded host-bound GPU trace (H100, ResNet-50 bf16)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from habitat.data.forecast import Forecast

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
HOST_BOUND = RESULTS / "h100-sxm5-80gb" / "traces" / "resnet50_bf16.json.gz"
DEVICE_BOUND = RESULTS / "h100-sxm5-80gb" / "traces" / "gpt2_small_fp32.json.gz"


def _doc(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def host_bound() -> Forecast:
    return Forecast.from_trace(_doc(HOST_BOUND), ["H100", "B200"])


def test_timeline_is_in_the_step_forecast(host_bound: Forecast) -> None:
    step = host_bound.latest
    t = step.timeline["H100-SXM5-80GB"]
    assert t["valid"] and t["host_bound"]
    assert t["launch_source"] == "op_times" and t["overhead_source"] == "wrapper_ops"
    # The step as seen is the host's time, far above the kernel sum; a faster GPU (B200)
    # does not shorten it.
    assert step.step_ms("H100") > 1.5 * step.time_ms("H100")
    assert step.step_ms("B200") == pytest.approx(step.step_ms("H100"), rel=0.02)
    assert step.host_bound("B200") is True
    assert any("format 1" in n for n in t["notes"])
    assert step.summary()["timeline"]["H100-SXM5-80GB"]["step_ms"] == t["step_ms"]


def test_device_bound_step_is_its_kernels() -> None:
    step = Forecast.from_trace(_doc(DEVICE_BOUND), ["H100"]).latest
    assert step.host_bound("H100") is False
    assert step.step_ms("H100") == pytest.approx(step.time_ms("H100"), rel=0.03)


def test_host_speed_scales_the_host_cadence(host_bound: Forecast) -> None:
    fast = Forecast.from_trace(_doc(HOST_BOUND), ["H100"], host_speed=2.0)
    assert fast.step_ms("H100") == pytest.approx(host_bound.step_ms("H100") / 2, rel=0.05)
    assert fast.host_speed == 2.0
    with pytest.raises(ValueError, match="host_speed must be a finite number > 0"):
        Forecast.from_trace(_doc(HOST_BOUND), ["H100"], host_speed=0)
    with pytest.raises(ValueError, match="host_speed must be a number"):
        Forecast(["H100"], host_speed="fast")  # type: ignore[arg-type]


def test_print_says_host_bound_and_what_would_help(host_bound: Forecast) -> None:
    text = str(host_bound)
    assert "step as seen (ms)" in text and "GPU busy" in text
    assert "Host-bound on H100-SXM5-80GB, B200" in text
    assert "A faster GPU will not make this step faster" in text
    assert "Timeline: Habitat's own recording time removed" in text


def test_a_host_bound_verdict_quotes_the_devices_busy_time() -> None:
    """The LSTM's cuDNN layers run on two streams at once (H100, 2026-11-26): its kernels sum to
    more than the step; the verdict quotes the time they kept the device busy."""
    lstm = RESULTS / "h100-sxm5-80gb-2026-11-26" / "traces" / "lstm_seq2seq_fp32.json.gz"
    forecast = Forecast.from_trace(_doc(lstm), ["H100"])
    t = forecast.latest.timeline["H100-SXM5-80GB"]
    assert t["host_bound"] and t["device_busy_ms"] < 0.8 * t["kernel_sum_ms"]
    assert f"kernels alone {t['device_busy_ms']:.3f} ms vs {t['step_ms']:.3f} ms step" in str(forecast)


def test_compare_shows_the_step_as_seen(host_bound: Forecast) -> None:
    comparison = host_bound.compare(["H100", "B200"])
    row = comparison["H100"]
    assert row.host_bound is True and row.step_ms == pytest.approx(host_bound.step_ms("H100"))
    assert row.to_dict()["host_bound"] is True
    text = str(comparison)
    assert "step as seen (ms)" in text and "Host-bound on every GPU: a faster GPU will not help" in text


def test_report_and_tensorboard_carry_the_timeline(host_bound: Forecast, tmp_path: Path) -> None:
    from habitat.present.report import write_report
    from habitat.present.timeline_view import summary

    out = write_report(host_bound, tmp_path / "r.md")
    text = Path(out).read_text()
    assert "step as seen (ms)" in text and "Host-bound on" in text
    s = summary(host_bound.latest, "H100-SXM5-80GB")
    assert s is not None and s["host_bound"] and 0 < s["gpu_busy_fraction"] < 0.9


def test_print_and_the_step_report_the_host_calibration(tmp_path: Path) -> None:
    """A format-2 trace carrying an untraced step's wall time: the step as seen is calibrated,
    and its factor and the step as traced are in forecast.latest and print(forecast); a saved
    forecast read back gives the same."""
    doc = _doc(RESULTS / "h100-sxm5-80gb-2026-11-26" / "traces" / "dcgan_bf16.json.gz")
    forecast = Forecast.from_trace(doc, ["H100"])
    t = forecast.latest.timeline["H100-SXM5-80GB"]
    assert 0.5 < t["host_scale"] < 1.0 and forecast.latest.host_scale("H100") == t["host_scale"]
    assert t["uncalibrated_step_ms"] > t["step_ms"] == pytest.approx(forecast.step_ms("H100"))
    text = str(forecast)
    assert "host calibration" in text and f"x{t['host_scale']:.2f}" in text
    assert any(line.split()[:3] == ["as", "traced", "(ms)"] and line.split()[3] == f"{t['uncalibrated_step_ms']:.3f}"
               for line in text.splitlines())
    assert any("host cadence scaled by" in n for n in t["notes"])
    back = Forecast.load(forecast.save(tmp_path / "f.json")).latest.timeline["H100-SXM5-80GB"]
    assert back["step_ms"] == pytest.approx(t["step_ms"]) and back["host_scale"] == pytest.approx(t["host_scale"])
    # Without the untraced wall: the step as traced, and the row says no calibration.
    doc["steps"][-1]["wall_ms"] = 0.0
    plain = Forecast.from_trace(doc, ["H100"])
    assert plain.latest.timeline["H100-SXM5-80GB"]["host_scale"] == plain.latest.host_scale() == 1.0
    assert "host calibration" in str(plain) and "as traced (ms)" not in str(plain)
