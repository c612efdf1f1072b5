"""Timeline fields the capture records (trace format 2): Habitat's own time per op and in
module hooks, so a forecast can take them out of the traced host cadence."""
from __future__ import annotations

import statistics

import pytest
import torch
from torch import nn

from habitat.capture.predict import record_step


def test_each_op_records_habitat_own_time() -> None:
    a = torch.randn(64, 64)
    with record_step() as rec:
        torch.nn.functional.linear(a, a, a[0])
    step = rec.step
    assert step is not None and step["ops"]
    for op in step["ops"]:
        assert op["overhead_us"] >= 0, op["name"]
    assert sum(op["overhead_us"] for op in step["ops"]) > 0


def test_module_hooks_time_is_recorded_per_step() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(4, 8)
    with record_step() as rec:
        model(x).sum().backward()
    step = rec.step
    assert step is not None
    assert step["hook_overhead_us"] > 0
    # Recorded as a fraction of the step, not more than it.
    assert step["hook_overhead_us"] < step["wall_ms"] * 1000


def test_module_hook_time_is_placed_before_the_next_op() -> None:
    """The hooks' time is also handed to the op recorded next on the thread (own_before_us),
    so the timeline removes it where it was spent; a step's total stays within its hooks'
    and commits' time."""
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(4, 8)
    with record_step() as rec:
        model(x).sum().backward()
    step = rec.step
    assert step is not None and step["ops"]
    assert all(op["own_before_us"] >= 0 for op in step["ops"])
    # Three module calls ran hooks before the forward's ops: some op took their time.
    assert sum(op["own_before_us"] for op in step["ops"]) >= step["hook_overhead_us"] > 0
    assert sum(op["own_before_us"] for op in step["ops"]) < step["wall_ms"] * 1000


def test_a_cpu_step_replayed_loses_habitats_time() -> None:
    """A CPU step traced by predict_on, replayed as an origin's op times (as
    benchmarks/timeline/cpu_replay.py does to compare it with the plain step): Habitat's own
    time comes out of the cadence, placed where it was spent, and the forecast says how."""
    import habitat
    from habitat.data import engine
    from habitat.data.forecast import Forecast

    gpu = "H100-SXM5-80GB"
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(16, 16), nn.ReLU())])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 16)
    predictor = habitat.predict_on(gpu, detail_steps=1)
    with predictor as forecast:
        model(x).square().mean().backward()
        opt.step()
    predictor.close()
    trace = forecast.latest.trace
    doc = engine.trace_document(dict(forecast.origin, device=gpu), [trace])
    timeline = Forecast.from_trace(doc, [gpu]).latest.timeline[gpu]
    span_ms = max(op["start_us"] + op["wall_us"] for op in trace["ops"]) / 1000
    assert timeline["overhead_source"] in ("measured", "measured+wrapper_ops")
    assert 0 < timeline["host_ms"] < span_ms
    assert timeline["overhead_removed_ms"] >= sum(op["overhead_us"] for op in trace["ops"]) / 1000
    assert any("module hooks where they ran" in note for note in timeline["notes"])


def test_forecast_captured_calibrates_the_host_to_a_steady_wall_time() -> None:
    """A detailed step's forecast given the wall time of the same step run without recording
    (steady_wall_ms): the timeline's host is scaled to it on a GPU origin (a committed H100
    trace, host-bound), and left as traced without it."""
    import gzip
    import json

    from habitat.data.checkout import checkout_path
    from habitat.data.engine import forecast_captured, forecast_trace

    gpu = "H100-SXM5-80GB"
    path = checkout_path("benchmarks/results/h100-sxm5-80gb/traces/dcgan_bf16.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    origin, steps = forecast_trace(json.dumps(doc), [gpu])
    capsule = steps[-1][0]
    as_traced = forecast_captured(capsule, doc["origin"], [gpu])[0]["timelines"][0]
    assert as_traced["host_scale"] == 1.0
    steady_ms = 0.6 * as_traced["host_ms"]
    calibrated = forecast_captured(capsule, doc["origin"], [gpu],
                                   steady_wall_ms=steady_ms)[0]["timelines"][0]
    assert 0.5 < calibrated["host_scale"] < 0.7
    assert calibrated["host_ms"] == pytest.approx(steady_ms, rel=1e-3)
    assert calibrated["step_ms"] < as_traced["step_ms"]
    assert any("uninstrumented step" in note for note in calibrated["notes"])


def test_predict_on_calibrates_reused_steps_to_its_steady_steps() -> None:
    """Steady-state steps reuse the detailed step's forecast with its timeline's host
    calibrated to the median wall time of the latest steady steps (a GPU origin is needed: the
    CPU step is forecast as if traced on an H100, its op times as the host cadence)."""
    import habitat
    from habitat.capture.predict import STEADY_MIN_STEPS

    gpu = "H100-SXM5-80GB"
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(16, 16), nn.ReLU())])
    x = torch.randn(4, 16)
    predictor = habitat.predict_on(gpu, detail_steps=1)
    predictor.forecast.origin["device"] = gpu  # what the worker sets from a CUDA step
    predictor._worker.origin_fixed = True
    for _ in range(12):
        with predictor as forecast:
            model(x).square().mean().backward()
    predictor.close()
    assert forecast.steps[0].timeline[gpu]["host_scale"] == 1.0  # a detailed step: as traced
    assert predictor.step_counts["reused"] >= STEADY_MIN_STEPS
    # End to end: each reused step's host is the median of the steady walls seen by then
    # (scale < 1), or as traced when that median was no shorter (a tiny CPU step, timing noise).
    reused = [s for s in forecast.steps if s.index > 2]  # steps 0-2: detailed or skipped
    walls = [s.measured_ms for s in reused]
    for n, step in enumerate(reused, start=1):
        t = step.timeline[gpu]
        if t["host_scale"] < 1.0:
            assert n >= STEADY_MIN_STEPS
            assert any(t["host_ms"] == pytest.approx(statistics.median(walls[max(0, k - 15):k]), rel=1e-6)
                       for k in range(STEADY_MIN_STEPS, n + 1))
    # The mechanism with chosen wall times: half the detailed step's host.
    from habitat.data.engine import forecast_captured

    fingerprint, (_, captured, peak_bytes, _, *_) = next(iter(predictor._worker.reused.by_fingerprint.items()))
    summary, rows = forecast_captured(captured.capsule, predictor.forecast.origin, [gpu])
    cached = (summary, captured, peak_bytes, rows, 0.0)  # as traced: calibrated to no wall time
    traced_host = summary["timelines"][0]["host_ms"]
    predictor._worker.reused.steady_walls.pop(fingerprint, None)
    for _ in range(STEADY_MIN_STEPS - 1):
        assert predictor._worker.reused.calibrated(fingerprint, 0.5 * traced_host, cached) is cached
    calibrated = predictor._worker.reused.calibrated(fingerprint, 0.5 * traced_host, cached)
    timeline = calibrated[0]["timelines"][0]
    assert 0.4 < timeline["host_scale"] < 0.6
    assert timeline["host_ms"] == pytest.approx(0.5 * traced_host, rel=1e-6)
    assert predictor._worker.reused.by_fingerprint[fingerprint] is calibrated
    # A median within STEADY_RECALIBRATE of the last one forecasts nothing again.
    assert predictor._worker.reused.calibrated(fingerprint, 0.52 * traced_host, calibrated) is calibrated
