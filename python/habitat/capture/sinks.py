"""Where ``predict_on`` sends each step's forecast: callbacks, in the manner of torch.profiler's
``on_trace_ready``.

A sink is any callable ``sink(forecast, step)``: ``forecast`` is the run's
:class:`~habitat.data.forecast.Forecast` (every step so far), ``step`` the
:class:`~habitat.data.forecast.StepForecast` just added. ``predict_on(..., on_step=sink)``
calls it on Habitat's background forecasting thread (named ``habitat-forecast-*``), once per
step, in step order, never on the training thread; an exception in it becomes a HabitatWarning.
A sink with a ``close()`` method has it called by ``predict_on.close()`` (or at exit).

``predict_on(..., log_dir=d)`` is ``on_step=[json_handler(d / "forecast.json"),
tensorboard_handler(d)]``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Union

from habitat.data.forecast import Forecast, StepForecast
from habitat.present.tensorboard import TensorBoardLogger

#: How often, at most, json_handler rewrites its file by default (and always at close()).
SAVE_EVERY_S = 60.0

StepSink = Callable[[Forecast, StepForecast], Any]
PathLike = Union[str, Path]


class json_handler:  # noqa: N801  (named like torch.profiler.tensorboard_trace_handler)
    """Saves the forecast (trace included, see Forecast.save) to `path` after a step, at most
    every `every_s` seconds (the trace is large), and at close()."""

    def __init__(self, path: PathLike, *, every_s: float = SAVE_EVERY_S) -> None:
        self.path = Path(path)
        self.every_s = every_s
        self._last_save = 0.0
        self._forecast: Forecast | None = None

    def __call__(self, forecast: Forecast, step: StepForecast) -> None:
        self._forecast = forecast
        now = time.monotonic()
        if not self._last_save or now - self._last_save >= self.every_s:
            self._save(forecast)
            self._last_save = now

    def _save(self, forecast: Forecast) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        forecast.save(self.path)

    def close(self) -> None:
        if self._forecast is not None and self._forecast._steps:
            self._save(self._forecast)


class tensorboard_handler:  # noqa: N801
    """Logs each step to TensorBoard in `log_dir` (see present.tensorboard.TensorBoardLogger);
    the writer opens at the first step and closes at close()."""

    def __init__(self, log_dir: PathLike, **options: Any) -> None:
        self.log_dir = Path(log_dir)
        self.options = options
        self._logger: TensorBoardLogger | None = None

    def __call__(self, forecast: Forecast, step: StepForecast) -> None:
        if self._logger is None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._logger = TensorBoardLogger(self.log_dir, **self.options)
        self._logger.log_step(forecast, step)

    def close(self) -> None:
        if self._logger is not None:
            self._logger.close()
            self._logger = None


def log_dir_sinks(log_dir: PathLike) -> list[StepSink]:
    """What ``predict_on(..., log_dir=...)`` does: the forecast saved, and TensorBoard."""
    log_dir = Path(log_dir)
    return [json_handler(log_dir / "forecast.json"), tensorboard_handler(log_dir)]
