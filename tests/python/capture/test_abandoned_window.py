"""A capture window entered and never exited is closed when its predictor is collected; the
default max_ops_per_step fits the memory available."""
from __future__ import annotations

import gc

import torch

import habitat
from habitat import _C
from habitat.capture.record import open_windows, record_step


def _ops_of_a_small_step() -> int:
    with record_step(1) as step:
        torch.ones(3) + 1
    assert step.step is not None
    return len(step.step["ops"])


def test_record_step_left_open_is_closed_when_collected() -> None:
    expected = _ops_of_a_small_step()
    window = record_step(0)
    window.__enter__()
    assert open_windows() == 1
    assert _C._capture_active()
    del window
    gc.collect()
    assert open_windows() == 0 and not _C._capture_active()
    assert _ops_of_a_small_step() == expected  # a new window sees only its own ops


def test_predictor_entered_never_exited_is_closed_when_collected() -> None:
    predictor = habitat.predict_on("A100")
    forecast = predictor.__enter__()
    torch.ones(2) * 2
    assert open_windows() == 1
    del predictor, forecast  # a cycle (the forecast waits on its predictor): the GC's
    gc.collect()
    assert open_windows() == 0 and not _C._capture_active()


def test_default_max_ops_fits_the_memory_available(monkeypatch) -> None:  # noqa: ANN001
    import habitat.capture.environment as environment

    monkeypatch.setattr(environment, "available_memory", lambda: 4 << 30)  # 4 GiB free
    assert environment.default_max_ops_per_step() == (1 << 30) // environment.BYTES_PER_RECORDED_OP
    monkeypatch.setattr(environment, "available_memory", lambda: 1 << 40)
    assert environment.default_max_ops_per_step() == environment.DEFAULT_MAX_OPS_PER_STEP
    monkeypatch.setattr(environment, "available_memory", lambda: 1 << 20)
    assert environment.default_max_ops_per_step() == environment.MIN_DEFAULT_MAX_OPS
    assert habitat.predict_on("A100").max_ops_per_step == environment.MIN_DEFAULT_MAX_OPS
