"""predict_on's steady-state schedule on its own (habitat.capture.schedule, torch-free): which
steps are detailed, fingerprinted or only timed, from fingerprints and wall times alone.
tests/python/capture/test_steady_state.py checks the same through predict_on on a model."""
from __future__ import annotations

import pytest

from habitat.capture.schedule import MAX_PENDING_STEPS, TIME_CHANGE_STEPS, WANTED_ATTEMPTS, StepSchedule


def _run(schedule: StepSchedule, fingerprints: list[int], wall_ms: float = 10.0) -> list[str]:
    """The kinds of len(fingerprints) steps, each step's fingerprint as given (a worker never
    behind)."""
    kinds = []
    for n, fingerprint in enumerate(fingerprints):
        kind = schedule.begin(n, detailed_backlog=0)
        kinds.append(kind)
        if kind == "detailed":
            schedule.detailed(n, fingerprint)
        elif kind == "fingerprinted":
            schedule.fingerprinted(n, fingerprint)
        else:
            schedule.timed(wall_ms)
    return kinds


def test_detail_steps_then_fingerprints_spread_out_to_fingerprint_every() -> None:
    schedule = StepSchedule(detail_steps=2, fingerprint_every=8)
    kinds = _run(schedule, [7] * 24)
    assert kinds[:2] == ["detailed", "detailed"]
    fingerprinted = [n for n, k in enumerate(kinds) if k == "fingerprinted"]
    # The gap doubles while the fingerprint repeats (2 after the second detailed step, 4, 8),
    # then stays at fingerprint_every; the steps between are only timed.
    assert fingerprinted == [3, 7, 15, 23]
    assert schedule.kind_counts == {"detailed": 2, "fingerprinted": 4, "timed": 18}


def test_a_new_fingerprint_makes_the_next_steps_detailed_until_given_up() -> None:
    schedule = StepSchedule(detail_steps=1, fingerprint_every=1)
    assert _run(schedule, [1]) == ["detailed"]
    assert schedule.begin(1, detailed_backlog=0) == "fingerprinted"
    assert schedule.fingerprinted(1, 1)  # known: its forecast is reused
    assert schedule.begin(2, detailed_backlog=0) == "fingerprinted"
    assert not schedule.fingerprinted(2, 2)  # new shapes: measured, and wanted in detail
    for n in range(3, 3 + WANTED_ATTEMPTS):
        assert schedule.begin(n, detailed_backlog=0) == "detailed"
        schedule.detailed(n, 3)  # not the wanted shapes (e.g. train and eval steps alternate)
    assert schedule.begin(3 + WANTED_ATTEMPTS, detailed_backlog=0) == "fingerprinted"


def test_detailed_steps_wait_for_a_worker_behind() -> None:
    schedule = StepSchedule(detail_steps=5)
    assert schedule.begin(0, detailed_backlog=MAX_PENDING_STEPS) == "fingerprinted"
    assert schedule.begin(0, detailed_backlog=MAX_PENDING_STEPS - 1) == "detailed"


def test_timed_steps_far_from_their_usual_time_make_the_next_one_fingerprinted() -> None:
    schedule = StepSchedule(detail_steps=1, fingerprint_every=64)
    _run(schedule, [5] * 8)
    assert schedule.begin(8, detailed_backlog=0) == "timed"
    assert schedule.timed(10.0) == 5  # the latest fingerprint's forecast, reused
    for n in range(9, 9 + TIME_CHANGE_STEPS):
        assert schedule.begin(n, detailed_backlog=0) == "timed"
        schedule.timed(30.0)  # 3x the usual time
    assert schedule.begin(9 + TIME_CHANGE_STEPS, detailed_backlog=0) == "fingerprinted"


@pytest.mark.parametrize(("argument", "value"), [("detail_steps", 0), ("detail_every", -1),
                                                 ("fingerprint_every", 0)])
def test_bad_arguments_name_themselves(argument: str, value: int) -> None:
    with pytest.raises(ValueError, match=argument):
        StepSchedule(**{argument: value})
