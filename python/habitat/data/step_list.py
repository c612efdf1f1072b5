"""Every step of a forecast, held compactly (:class:`StepList`)."""
from __future__ import annotations

import threading
from array import array
from typing import Any, Iterator, Sequence, overload

from habitat.data.step_forecast import StepForecast


class StepList(Sequence[StepForecast]):
    """Every step of a forecast, as a list to read (``len``, ``steps[i]``, ``steps[-1]``,
    slices, iteration), held compactly: a long run keeps a few numbers per step, not an object.

    The latest steps (those still holding per-op detail, ``keep_steps``) are StepForecast
    objects. An older step is stored as its index, its measured time and the position of its
    totals in a table of distinct totals (steps forecast alike share them: predict_on's reused
    steps), ~20 bytes, and becomes a StepForecast again (totals only, as it was once its detail
    was dropped) when read. Such a step is a new object each time it is read: change nothing
    in it (the totals were shared between steps before, too)."""

    __slots__ = ("_index", "_measured", "_totals_at", "_totals", "_totals_of", "_odd", "_live",
                 "_lock")

    def __init__(self) -> None:
        # The older steps, in order: index, measured ms, position in _totals.
        self._index = array("q")
        self._measured = array("d")
        self._totals_at = array("I")
        # Distinct totals: (targets, total_ms, phase_ms, method_ops, unsupported, timeline);
        # _totals_of finds one by id(total_ms) (the table holds it, so the id stays its own).
        self._totals: list[tuple[Any, ...]] = []
        self._totals_of: dict[int, int] = {}
        # Older steps that would not read back identically from the columns (an index that is
        # no int, a time that is no float, an object that is no plain StepForecast): by position.
        self._odd: dict[int, StepForecast] = {}
        # The latest steps, as appended (a list: indexed in O(1) when keep_steps is None).
        self._live: list[StepForecast] = []
        self._lock = threading.Lock()

    def append(self, step: StepForecast) -> None:
        with self._lock:
            self._live.append(step)

    def retire(self, keep: int) -> list[StepForecast]:
        """Stores all but the `keep` latest steps compactly; returns the steps it stored
        (whose detail the caller drops)."""
        with self._lock:
            leaving = len(self._live) - keep
            if leaving <= 0:
                return []
            retired = self._live[:leaving]
            del self._live[:leaving]
            for step in retired:
                self._store(step)
        return retired

    def _store(self, step: StepForecast) -> None:
        at = len(self._index)
        plain = (type(step) is StepForecast and type(step.index) is int
                 and -(1 << 63) <= step.index < (1 << 63) and type(step.measured_ms) is float)
        if not plain:
            self._odd[at] = step
            index, measured, position = 0, 0.0, 0
        else:
            index, measured = step.index, step.measured_ms
            totals = (step.targets, step.total_ms, step.phase_ms, step.method_ops,
                      step.unsupported, step.timeline)
            position = self._totals_of.get(id(step.total_ms), -1)
            if position < 0 or any(a is not b for a, b in zip(self._totals[position], totals)):
                position = len(self._totals)
                self._totals.append(totals)
                self._totals_of[id(step.total_ms)] = position
        self._index.append(index)
        self._measured.append(measured)
        self._totals_at.append(position)

    def _at(self, i: int) -> StepForecast:
        """The step at position `i` (0 <= i < len), under the lock."""
        stored = len(self._index)
        if i >= stored:
            return self._live[i - stored]
        odd = self._odd.get(i) if self._odd else None
        if odd is not None:
            return odd
        targets, total_ms, phase_ms, method_ops, unsupported, timeline = self._totals[self._totals_at[i]]
        return StepForecast(index=self._index[i], measured_ms=self._measured[i], targets=targets,
                            total_ms=total_ms, phase_ms=phase_ms, method_ops=method_ops,
                            unsupported=unsupported, timeline=timeline)

    def __len__(self) -> int:
        return len(self._index) + len(self._live)

    @overload
    def __getitem__(self, i: int) -> StepForecast: ...

    @overload
    def __getitem__(self, i: slice) -> list[StepForecast]: ...

    def __getitem__(self, i: int | slice) -> StepForecast | list[StepForecast]:
        with self._lock:
            n = len(self._index) + len(self._live)
            if isinstance(i, slice):
                return [self._at(j) for j in range(*i.indices(n))]
            j = i.__index__()
            if j < 0:
                j += n
            if not 0 <= j < n:
                raise IndexError("step index out of range")
            return self._at(j)

    def __iter__(self) -> Iterator[StepForecast]:
        i = 0
        while True:  # steps appended meanwhile are included, as a list's iterator does
            with self._lock:
                if i >= len(self._index) + len(self._live):
                    return
                step = self._at(i)
            yield step
            i += 1

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (StepList, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return repr(list(self))

