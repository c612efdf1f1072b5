"""Forecast.steps held compactly (issue 14, bounded memory): a long run reads back exactly as
the list of StepForecast objects it replaced."""
from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from habitat.data import engine
from habitat.data.forecast import Forecast, StepForecast, StepList
from habitat.present.report import build_blocks, render_markdown

TARGETS = ["A100", "T4"]


class _ListForecast(Forecast):
    """The reference: every step a StepForecast in a plain list, the detail of the step that
    leaves the history dropped (what Forecast did before StepList)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._steps = []  # type: ignore[assignment]

    def _append(self, forecast: StepForecast) -> StepForecast:
        steps = self._steps
        steps.append(forecast)
        if self.keep_steps is not None:
            leaving = len(steps) - self.keep_steps
            if leaving > 0:
                steps[leaving - 1].drop_detail()
                self.dropped_detail_steps += 1
        return forecast


def _long_run(cls: type[Forecast], doc: dict[str, Any], n: int, keep_steps: int | None) -> Forecast:
    """A training run as predict_on's worker fills it: two kinds of step (train and eval,
    each forecast once, then reused with its own measured time), a new detailed forecast now
    and then, a few steps with an int time or a large index (stored as they are)."""
    forecast = cls(TARGETS, doc["origin"], keep_steps=keep_steps)
    kinds = [engine.forecast_step_parts(doc["origin"], step, forecast.targets)
             for step in (doc["steps"][0], doc["steps"][-1])]
    for i in range(n):
        kind = 1 if i % 10 == 9 else 0
        summary, rows = kinds[kind]
        step = doc["steps"][-kind]
        if i % 500 == 0:  # a fresh detailed forecast: its own summary object
            summary, rows = engine.forecast_step_parts(doc["origin"], step, forecast.targets)
            kinds[kind] = (summary, rows)
        measured: float = 3 if i % 97 == 0 else 1.0 + (i % 13) * 0.25
        index = (1 << 70) if i == 5 else i
        forecast._add_forecast(index, measured, summary, lambda s=step, r=rows: (s, r), rows)
    return forecast


def _compared(forecast: Forecast) -> str:
    try:
        return str(forecast.compare(TARGETS))
    except RuntimeError as e:  # no step holds detail (keep_steps=0): the same message
        return f"RuntimeError: {e}"


@pytest.mark.parametrize("keep_steps", [8, 0, 3, None])
def test_a_long_run_reads_back_as_the_list_it_replaced(golden_trace: Path, keep_steps: int | None):
    doc = json.loads(golden_trace.read_text())
    n = 2_000
    compact = _long_run(Forecast, doc, n, keep_steps)
    reference = _long_run(_ListForecast, doc, n, keep_steps)
    assert isinstance(compact.steps, StepList) and isinstance(reference.steps, list)

    assert len(compact.steps) == len(reference.steps) == n
    assert compact.steps == reference.steps and list(compact.steps) == reference.steps
    for i in (0, 1, 5, 97, n - 9, n - 8, n - 1, -1, -2, -8, -9, -n):
        assert compact.steps[i] == reference.steps[i], i
        assert compact.steps[i].summary() == reference.steps[i].summary()
    for s in (slice(None), slice(-5, None), slice(None, None, 7), slice(3, 2), slice(-3, -1),
              slice(None, None, -1), slice(n - 20, None, 3)):
        assert compact.steps[s] == reference.steps[s], s
    with pytest.raises(IndexError):
        compact.steps[n]
    with pytest.raises(IndexError):
        compact.steps[-n - 1]
    assert [s.index for s in reversed(compact.steps)] == [s.index for s in reversed(reference.steps)]

    assert compact.dropped_detail_steps == reference.dropped_detail_steps
    assert compact.detail_note() == reference.detail_note()
    assert compact.to_json() == reference.to_json()
    assert compact.to_json(last_steps=10) == reference.to_json(last_steps=10)
    assert str(compact) == str(reference)
    assert (render_markdown(build_blocks(compact, None))
            == render_markdown(build_blocks(reference, None)))
    assert _compared(compact) == _compared(reference)
    # The steps holding detail are the very objects appended, detail and all.
    held = [s for s in compact.steps if s.holds_trace]
    assert len(held) == (n if keep_steps is None else keep_steps)
    assert all(a.trace == b.trace for a, b in zip(compact.steps[n - len(held):], reference.steps[n - len(held):]))


def test_older_steps_share_their_totals_and_cost_a_few_bytes(golden_trace: Path):
    """predict_on's steady steps: train and eval steps alternating, each reusing the forecast
    (the same summary object) of its first step."""
    doc = json.loads(golden_trace.read_text())
    forecast = Forecast(TARGETS, doc["origin"])
    kinds = [engine.forecast_step_parts(doc["origin"], step, forecast.targets)
             for step in (doc["steps"][0], doc["steps"][-1])]

    def add(i: int) -> None:
        summary, rows = kinds[i % 2]
        forecast._add_forecast(i, 1.0 + i, summary, lambda: (doc["steps"][0], rows), rows)

    for i in range(1_000):
        add(i)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1_000, 21_000):
            add(i)
        per_step = (tracemalloc.get_traced_memory()[0] - before) / 20_000
    finally:
        tracemalloc.stop()
    assert per_step <= 40, per_step
    steps = forecast.steps
    assert steps[0].total_ms is steps[-2].total_ms is steps[500].total_ms
    assert steps[1].total_ms is steps[-1].total_ms and steps[1].total_ms is not steps[0].total_ms
    assert steps[12_345].measured_ms == 1.0 + 12_345 and steps[12_345].index == 12_345


def test_lowering_keep_steps_drops_the_detail_of_every_step_past_it(golden_trace: Path):
    doc = json.loads(golden_trace.read_text())
    forecast = Forecast(TARGETS, doc["origin"], keep_steps=None)
    for step in doc["steps"] * 3:
        forecast.add_step(step)
    assert all(s.holds_trace for s in forecast.steps)
    forecast.keep_steps = 1
    forecast.add_step(doc["steps"][0])
    assert [s.holds_trace for s in forecast.steps] == [False] * (len(forecast.steps) - 1) + [True]
    assert forecast.dropped_detail_steps == len(forecast.steps) - 1
