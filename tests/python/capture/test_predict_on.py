"""habitat.predict_on around real training steps: capture + forecast, end to end on CPU."""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest
import torch
from models import OPTIMIZERS, WORKLOADS, make_workload
from threads import run_in_threads

import habitat
from habitat.capture.predict import HabitatWarning
from habitat.data.forecast import Forecast

TARGETS = ["A100", "H100", "L4"]


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("name", WORKLOADS)
def test_three_steps_forecast_positive_and_finite(name: str, optimizer: str) -> None:
    work = make_workload(name, optimizer)
    predictor = habitat.predict_on(TARGETS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HabitatWarning)  # forecasting must not fail
        for _ in range(3):
            with predictor as forecast:
                work.step()
    assert len(forecast.steps) == 3
    assert [s.index for s in forecast.steps] == [0, 1, 2]
    for step in forecast.steps:
        assert step.measured_ms > 0
        for target in forecast.targets:
            assert math.isfinite(step.total_ms[target]) and step.total_ms[target] > 0
    for target in TARGETS:
        assert forecast.time_ms(target) > 0
    phases = {op.phase for op in forecast.ops}
    assert {"forward", "backward", "optimizer"} <= phases
    # Each piece of work once: the op shares add up to the step and to each phase.
    step = forecast.latest
    for target in step.targets:
        counted = step.counted_ops(target)
        assert sum(op.share_us(target) for op in counted) == pytest.approx(
            step.total_ms[target] * 1e3, rel=1e-9)
        for phase, ms in step.phase_ms[target].items():
            assert sum(op.share_us(target) for op in counted if op.phase == phase) == \
                pytest.approx(ms * 1e3, rel=1e-9)
        assert all(op.share_us(target) <= op.time_us(target) * (1 + 1e-12) for op in counted)
    for op in forecast.ops:
        for target in forecast.targets:
            assert math.isfinite(op.predictions[target].time_us)
            assert op.predictions[target].time_us >= 0
    assert str(forecast)


def test_unknown_gpu_raises_before_any_step() -> None:
    with pytest.raises(Exception, match="(?i)unknown|not found|no such"):
        habitat.predict_on("NoSuchGPU-9000")


def test_forecast_round_trips_and_reforecasts_for_other_gpus(tmp_path: Path) -> None:
    work = make_workload("mlp", "adam")
    with habitat.predict_on("A100") as forecast:
        work.step()
    path = forecast.save(tmp_path / "step.json")
    doc = json.loads(path.read_text())
    assert doc["steps"][0]["ops"]
    again = Forecast.load(path, targets=["H100", "L4"])
    assert len(again.steps) == 1 and again.time_ms("H100") > 0 and again.time_ms("L4") > 0
    same = Forecast.load(path)  # targets from the saved forecast
    assert same.time_ms("A100") == pytest.approx(forecast.time_ms("A100"))


def test_exception_inside_the_step_propagates_and_discards_it() -> None:
    work = make_workload("mlp")
    predictor = habitat.predict_on("A100")
    with predictor as forecast:
        work.step()
    with pytest.raises(KeyError, match="from the step"):
        with predictor:
            work.model(work.inputs)
            raise KeyError("from the step")
    assert len(forecast.steps) == 1
    with predictor:  # the object is reusable after the failure
        work.step()
    assert len(forecast.steps) == 2


def test_the_same_context_cannot_nest_but_two_can() -> None:
    work = make_workload("mlp")
    outer = habitat.predict_on("A100")
    with outer:
        with pytest.raises(RuntimeError, match="already open"):
            with outer:
                pass
    inner = habitat.predict_on("H100")
    with outer as f_outer:
        work.model(work.inputs)
        with inner as f_inner:
            work.step()
    assert len(f_inner.ops) < len(f_outer.ops)
    inner_names = [op.full_name for op in f_inner.ops]
    outer_names = [op.full_name for op in f_outer.ops]
    assert outer_names[-len(inner_names):] == inner_names


def test_two_threads_share_one_predictor() -> None:
    predictor = habitat.predict_on("A100")

    def worker(seed: int) -> None:
        work = make_workload("mlp", seed=seed)
        for _ in range(2):
            with predictor:
                work.step()

    run_in_threads(worker, (0, 1))
    # Every step is accounted for. A steady-state step whose fingerprint no detailed step had
    # yet (here: the threads' second steps, Adam's state now created, when the first steps
    # were the detailed ones) is measured but not forecast (see predict_on's detail_steps).
    counts = predictor.step_counts
    assert sum(counts.values()) == 4 and counts["detailed"] >= 2
    indices = sorted(s.index for s in predictor.forecast.steps)
    assert len(indices) == counts["detailed"] + counts["reused"]
    assert len(set(indices)) == len(indices) and set(indices) <= {0, 1, 2, 3}
    sizes = {len(s.ops) for s in predictor.forecast.steps[-2:]}
    assert all(n > 0 for n in sizes)


def test_forecast_failure_becomes_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    work = make_workload("mlp")
    predictor = habitat.predict_on("A100")

    def broken(*args: object) -> None:
        raise RuntimeError("engine exploded")

    monkeypatch.setattr(predictor.forecast, "_add_forecast", broken)
    with pytest.warns(HabitatWarning, match="engine exploded"):
        with predictor:
            loss = work.step()
        predictor.wait()  # the step is forecast in the background; its warning comes here
    assert torch.isfinite(loss)
    assert predictor.forecast.steps == []


def test_dropped_ops_are_reported() -> None:
    work = make_workload("mlp")
    with pytest.warns(HabitatWarning, match="were not recorded"):
        with habitat.predict_on("A100", max_ops_per_step=5) as forecast:
            work.step()
        assert len(forecast.ops) == 5  # reading the forecast raises the pending warning


def test_log_dir_saves_the_forecast(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    work = make_workload("mlp")
    predictor = habitat.predict_on("A100", log_dir=tmp_path)
    for _ in range(2):
        with predictor:
            work.step()
    predictor.close()  # writes the last forecast.json and closes the TensorBoard writer
    saved = Forecast.load(tmp_path / "forecast.json")
    assert len(saved.steps) == 2
    # TensorBoard events go to a run directory of their own (one per predict_on)
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.rglob("*"))


def test_an_unclosed_predictor_writes_its_log_dir_at_exit(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    import subprocess
    import sys

    script = ("import sys, torch, habitat\n"
              "m = torch.nn.Linear(4, 4)\n"
              "p = habitat.predict_on('A100', log_dir=sys.argv[1])\n"
              "for _ in range(3):\n"
              "    with p:\n"
              "        m(torch.randn(2, 4)).sum().backward()\n")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert len(Forecast.load(tmp_path / "forecast.json").steps) == 3


def test_step_indices_do_not_skip_after_a_failed_step() -> None:
    work = make_workload("mlp")
    predictor = habitat.predict_on("A100")
    with predictor:
        work.step()
    with pytest.raises(ValueError):
        with predictor:
            raise ValueError("the user's step failed")
    with predictor:
        work.step()
    assert [s.index for s in predictor.forecast.steps] == [0, 1]


def test_step_time_ms_matches_the_forecast() -> None:
    work = make_workload("mlp")
    with habitat.predict_on(["A100", "H100"]) as forecast:
        work.step()
    step = forecast.latest
    assert step.time_ms("h100") == forecast.time_ms("H100") > 0
    assert step.time_ms() == forecast.time_ms() == step.total_ms[step.targets[0]]
    with pytest.raises(KeyError, match="not a forecast target"):
        step.time_ms("L4")


def test_on_step_is_called_per_step_off_the_training_thread() -> None:
    import threading

    work = make_workload("mlp")
    calls = []

    class Sink:
        closed = False

        def __call__(self, forecast, step):
            calls.append((forecast, step.index, step.time_ms("A100"), threading.current_thread().name))

        def close(self):
            Sink.closed = True

    predictor = habitat.predict_on("A100", on_step=Sink())
    for _ in range(3):
        with predictor as forecast:
            work.step()
    predictor.close()
    assert [c[1] for c in calls] == [0, 1, 2]
    assert all(c[0] is forecast for c in calls)
    assert [c[2] for c in calls] == [s.time_ms("A100") for s in forecast.steps]
    assert all(c[3].startswith("habitat-forecast") for c in calls)
    assert Sink.closed


def test_a_failing_sink_becomes_a_warning() -> None:
    work = make_workload("mlp")

    def broken(forecast, step):
        raise RuntimeError("sink exploded")

    predictor = habitat.predict_on("A100", on_step=[broken])
    with pytest.warns(HabitatWarning, match="sink exploded"):
        with predictor:
            work.step()
        predictor.wait()
    assert len(predictor.forecast.steps) == 1


def test_json_and_tensorboard_handlers(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    work = make_workload("mlp")
    predictor = habitat.predict_on("A100", on_step=[habitat.json_handler(tmp_path / "a" / "f.json"),
                                                    habitat.tensorboard_handler(tmp_path / "tb")])
    for _ in range(2):
        with predictor:
            work.step()
    predictor.close()
    assert len(Forecast.load(tmp_path / "a" / "f.json").steps) == 2
    assert any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "tb").iterdir())


def test_on_step_rejects_what_is_not_callable() -> None:
    with pytest.raises(TypeError, match="callables"):
        habitat.predict_on("A100", on_step=["not a sink"])


@pytest.mark.parametrize("bad", [None, 5, "", [], ["A100", 3]])
def test_bad_target_values_get_the_unknown_gpu_advice(bad) -> None:  # noqa: ANN001
    from habitat.data.devices import UnknownDeviceError

    with pytest.raises(UnknownDeviceError, match="pass a GPU name, a list of names or 'all'"):
        habitat.predict_on(bad)


def test_all_gpus_and_keep_steps() -> None:
    work = make_workload("mlp")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning on the way
        predictor = habitat.predict_on("all", keep_steps=1, detail_steps=3)
        for _ in range(3):
            with predictor:
                work.step()
        predictor.close()
    forecast = predictor.forecast
    assert forecast.targets == [d.name for d in habitat.devices()]
    assert [s.holds_trace for s in forecast.steps] == [False, False, True]
    assert "per-op detail kept for the last 1 step" in str(forecast)
    saved = json.loads(forecast.to_json())
    assert len(saved["steps"]) == 1 and saved["forecast"]["dropped_detail_steps"] == 2
    with pytest.raises(ValueError, match="keep_steps"):
        habitat.predict_on("A100", keep_steps=-1)
