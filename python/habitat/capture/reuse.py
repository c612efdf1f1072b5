"""The forecasts predict_on's steady-state steps reuse: per fingerprint, the forecast of the
latest detailed step with it, its timeline's host calibrated to the wall times of the steady
steps (which record nothing, or only a fingerprint), and the detailed step decoded once for
all the steps that reuse it. Worker side: only the forecast thread reads and changes it."""
from __future__ import annotations

import json
import statistics
import weakref
from collections import deque
from typing import Any

from habitat.capture.record import decode_step
from habitat.capture.schedule import MAX_FINGERPRINTS
from habitat.data.engine import forecast_captured
from habitat.data.forecast import Forecast

#: The timeline's host is calibrated to the median wall time of a fingerprint's latest
#: STEADY_WINDOW steady-state steps, once STEADY_MIN_STEPS are seen; the median moving by more
#: than STEADY_RECALIBRATE (relative) since forecasts the detailed step again.
STEADY_WINDOW = 15
STEADY_MIN_STEPS = 5
STEADY_RECALIBRATE = 0.1


class _DecodedStep(dict):
    """A detailed step decoded once for the steady-state steps that reuse its forecast: their
    trace dicts (:class:`_ReusedStep`) share its ops, and ReusedForecasts holds it weakly, so it
    lives only while some step still holds its detail."""

    __slots__ = ("__weakref__", "_json_rest")

    def json_rest(self) -> str:
        """Its JSON without index and wall time, less the opening brace (encoded once)."""
        try:
            return self._json_rest
        except AttributeError:
            rest = {k: v for k, v in self.items() if k not in ("index", "wall_ms", "uninstrumented_wall_ms")}
            self._json_rest = json.dumps(rest)[1:]
            return self._json_rest


class _ReusedStep(dict):
    """The trace dict of a reused step: its own index and time, the decoded step's ops, and
    the untraced wall time its forecast was calibrated to (``uninstrumented_wall_ms``, when
    it was), so that the saved step forecasts as the live one did."""

    __slots__ = ("_source",)

    def __init__(self, source: _DecodedStep, index: int, wall_ms: float,
                 calibrated_to_ms: float = 0.0) -> None:
        super().__init__(source)
        self["index"], self["wall_ms"] = index, wall_ms
        if calibrated_to_ms > 0:
            self["uninstrumented_wall_ms"] = calibrated_to_ms
        self._source = source  # keeps the shared decode alive while this step holds detail

    def json_text(self) -> str:
        """The step as JSON (Forecast.to_json), its ops encoded once for all reusing steps."""
        rest = self._source.json_rest()
        head = f'{{"index":{json.dumps(self["index"])},"wall_ms":{json.dumps(self["wall_ms"])}'
        if "uninstrumented_wall_ms" in self:
            head += f',"uninstrumented_wall_ms":{json.dumps(self["uninstrumented_wall_ms"])}'
        return head + ("," + rest if rest != "}" else "}")



class ReusedForecasts:
    """Per fingerprint: (summary, captured step, peak bytes, per-op rows, the steady-state
    wall time (ms) its timeline is calibrated to, 0.0 for none), the latest MAX_FINGERPRINTS
    fingerprints."""

    def __init__(self, forecast: Forecast) -> None:
        self.forecast = forecast
        self.by_fingerprint: dict[int, tuple[Any, ...]] = {}
        self.steady_walls: dict[int, deque[float]] = {}  # latest steady walls per fingerprint
        # The decoded detailed step per fingerprint, while reused steps hold it (saving
        # forecast.json reads every kept step's trace: decode each fingerprint once).
        self._decoded: "weakref.WeakValueDictionary[int, _DecodedStep]" = weakref.WeakValueDictionary()

    def keep(self, fingerprint: int, summary: dict[str, Any], captured: Any, peak_bytes: int,
             rows: Any) -> None:
        """The forecast of a detailed step, as traced (calibrated to no wall time)."""
        cache = self.by_fingerprint
        cache.pop(fingerprint, None)
        cache[fingerprint] = (summary, captured, peak_bytes, rows, 0.0)
        while len(cache) > MAX_FINGERPRINTS:
            cache.pop(next(iter(cache)))

    def trace(self, fingerprint: int, captured: Any, peak_bytes: int, index: int,
              wall_ms: float, calibrated_to_ms: float = 0.0) -> _ReusedStep:
        """The trace dict of reused step `index` (called under the forecast's detail lock)."""
        decoded = self._decoded.get(fingerprint)
        if decoded is None:
            decoded = _DecodedStep(decode_step(captured, peak_bytes))
            self._decoded[fingerprint] = decoded
        return _ReusedStep(decoded, index, wall_ms, calibrated_to_ms)

    def calibrated(self, fingerprint: int, wall_ms: float,
                   cached: tuple[Any, ...]) -> tuple[Any, ...]:
        """The detailed step's forecast with the timeline's host calibrated to the median wall
        time of this fingerprint's latest steady-state steps (they record nothing, or only a
        fingerprint; a detailed step's host is slowed by the capture and CUPTI beyond what the
        engine removes per op). Forecast again once STEADY_MIN_STEPS are seen, and again when
        their median moves by more than STEADY_RECALIBRATE; GPU origins only (a CPU origin's
        host cadence is modelled, not replayed)."""
        if self.forecast.origin.get("device", "cpu") == "cpu":
            return cached
        if fingerprint not in self.steady_walls and len(self.steady_walls) >= MAX_FINGERPRINTS:
            for gone in [fp for fp in self.steady_walls if fp not in self.by_fingerprint]:
                del self.steady_walls[gone]
        walls = self.steady_walls.setdefault(fingerprint, deque(maxlen=STEADY_WINDOW))
        walls.append(wall_ms)
        if len(walls) < STEADY_MIN_STEPS:
            return cached
        median = statistics.median(walls)
        calibrated_to = cached[4]
        if calibrated_to and abs(median / calibrated_to - 1) <= STEADY_RECALIBRATE:
            return cached
        summary, captured, peak_bytes, _, _ = cached
        try:
            summary, rows = forecast_captured(captured.capsule, self.forecast.origin, self.forecast.targets,
                                              self.forecast.host_speed, steady_wall_ms=median)
        except Exception:  # the uncalibrated forecast stands
            return cached
        calibrated = (summary, captured, peak_bytes, rows, median)
        self.by_fingerprint[fingerprint] = calibrated
        return calibrated
