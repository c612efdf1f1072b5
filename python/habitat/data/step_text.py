"""A step held by the engine read as its JSON text: the few ops a view prints are decoded alone
(see :meth:`habitat.data.step_forecast.StepForecast.text_view`)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

from habitat.data.op_forecast import OpForecast, canonical, op_forecasts_at, top_indices
from habitat.data.op_rows import OpRows

if TYPE_CHECKING:
    from habitat.data.step_forecast import StepForecast


class StepText:
    """A step held by the engine, as its JSON text (bytes), not decoded: the few ops a view
    prints are found by their id and decoded alone (``print(forecast)`` of a step of 90k ops
    decoded all of them to show ten). See :meth:`StepForecast.text_view`."""

    __slots__ = ("text", "rows", "step", "_ops_at")

    def __init__(self, text: bytes, rows: OpRows, step: StepForecast) -> None:
        self.text, self.rows, self.step = text, rows, step
        self._ops_at = text.find(b'"ops":[')

    def contains(self, piece: str) -> bool:
        """Whether `piece` occurs in the step's text (as JSON writes it: "/" escaped or not)."""
        encoded = json.dumps(piece)[1:-1].encode()
        return encoded in self.text or encoded.replace(b"/", b"\\/") in self.text

    def op_dict(self, op_id: int) -> dict[str, Any] | None:
        """The trace dict of the op with `op_id`, or None when the text does not name it
        exactly once as an op (the caller then decodes the step)."""
        if self._ops_at < 0:
            return None
        needle = b'{"id":%d,' % op_id
        at = self.text.find(needle, self._ops_at)
        if at < 0 or self.text.find(needle, at + 1) >= 0:
            return None
        decoder = json.JSONDecoder()
        width = 4096
        while True:
            window = self.text[at:at + width]
            try:
                op, _ = decoder.raw_decode(window.decode("utf-8", errors="ignore"))
                break
            except ValueError:
                if at + width >= len(self.text):
                    return None
                width *= 4
        if not isinstance(op, dict) or op.get("id") != op_id or "name" not in op:
            return None
        return op

    def ops_at(self, indices: Sequence[int]) -> list[OpForecast] | None:
        """The ops at `indices`, as :meth:`StepForecast.ops_at` gives them, or None."""
        ids = self.rows.array["id"]
        found = {}
        for i in indices:
            op = self.op_dict(int(ids[i]))
            if op is None:
                return None
            found[i] = op
        return op_forecasts_at({"ops": found}, self.rows, indices)

    def top_ops(self, target: str, n: int = 10) -> list[OpForecast] | None:
        """:meth:`StepForecast.top_ops`, the chosen ops decoded alone; None when they could
        not be (then ask the step)."""
        name = canonical(target)
        if name not in self.rows.targets:
            return None
        return self.ops_at(top_indices(self.rows, name, n))

