"""Where ``predict_on`` sends each step's forecast: callbacks, in the manner of torch.profiler's
``on_trace_ready``.

A sink is any callable ``sink(forecast, step)``: ``forecast`` is the run's
:class:`~habitat.data.forecast.Forecast` (every step so far), ``step`` the
:class:`~habitat.data.forecast.StepForecast` just added. ``predict_on(..., on_step=sink)``
calls it on Habitat's background forecasting thread (named ``habitat-forecast-*``), once per
step, in step order, never on the training thread; an exception in it becomes a HabitatWarning.
A sink with a ``close()`` method has it called by ``predict_on.close()`` (or at exit).

``predict_on(..., log_dir=d)`` is ``on_step=log_dir_sinks(d)``:

- ``d/forecast.json``: the forecast (trace of the steps with detail + every step's totals),
  rewritten atomically every ``SAVE_EVERY_STEPS`` steps and at close (:class:`json_handler`);
  a run that finds another live run writing it saves to ``d/<run>/forecast.json`` instead
  (a :class:`LogDirWarning` says so), so runs sharing `d` never overwrite each other's;
- ``d/steps.jsonl``: one JSON line of totals per step, appended as each step is forecast
  (:class:`history_handler`); lines carry the run name, so runs sharing `d` are told apart;
- ``d/<run>/events.out.tfevents.*``: TensorBoard, one run directory per ``predict_on``
  (:class:`tensorboard_handler`).

Killing the process at any point leaves a loadable ``forecast.json`` (at most
``SAVE_EVERY_STEPS`` steps behind, or ``CATCH_UP_S`` seconds while predict_on coalesces steps
whose sinks would take more than their share of the training time) and every forecast step's
totals in ``steps.jsonl``. A normal exit, Ctrl-C or SIGTERM writes every step and a final
``forecast.json`` (predict_on closes open predictors at exit).
A log_dir that cannot be written (a path under a file, no permission) gives one warning naming
the path and the fix, then the run goes on without files; ``close()`` never raises.
"""
from __future__ import annotations

import itertools
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Union

from habitat.data.files import LineLog
from habitat.data.forecast import Forecast, StepForecast
from habitat.present.tensorboard import TensorBoardLogger

try:
    import fcntl
except ImportError:  # Windows: no locks, every run owns the file
    fcntl = None  # type: ignore[assignment]

#: How many steps apart json_handler rewrites its file by default (and always at close()).
SAVE_EVERY_STEPS = 10
#: While predict_on coalesces steps (its sinks over their share of the training time),
#: forecast.json is saved at most this often (seconds), still every SAVE_EVERY_STEPS steps.
CATCH_UP_S = 1.0
#: Steps whose totals forecast.json repeats (the latest ones): writing every step's totals
#: every SAVE_EVERY_STEPS steps would make a long run quadratic; steps.jsonl holds them all.
SAVED_STEP_TOTALS = 100
#: Former time-based default, kept for callers passing every_s; None = steps only.
SAVE_EVERY_S: float | None = None
HISTORY_FILE = "steps.jsonl"
FORECAST_FILE = "forecast.json"

StepSink = Callable[[Forecast, StepForecast], Any]
PathLike = Union[str, Path]


class LogDirError(OSError):
    """A log_dir (or a sink's file) that cannot be written; raised once, then the sink stops."""


class LogDirWarning(UserWarning):
    """A log_dir shared with another run: this run's forecast.json goes to its own folder."""


def _directory_problem(directory: Path, exc: OSError) -> str:
    """Why `directory` cannot be used, with the fix."""
    for parent in [directory, *directory.parents]:
        if parent.exists() and not parent.is_dir():
            return (f"habitat: cannot write log files to {str(directory)!r}: {str(parent)!r} is a "
                    "file, not a directory; pass a directory path to predict_on(log_dir=...) "
                    "(nothing is saved there for this run, the forecast itself is unaffected)")
    return (f"habitat: cannot write log files to {str(directory)!r} ({exc.strerror or exc}); "
            "pass a writable directory to predict_on(log_dir=...) (nothing is saved there "
            "for this run, the forecast itself is unaffected)")


class _Guard:
    """Failure state shared by the sinks of one log_dir: the first failure raises one
    LogDirError (predict_on turns it into one warning); later ones are silent. A sink whose
    directory cannot be created stops; one whose write failed (a full disk) tries again at
    its next turn."""

    def __init__(self) -> None:
        self.reported = False
        self.unusable = False
        self._made: set[Path] = set()  # directories created (once, not at every step)

    def run(self, directory: Path, work: Callable[[], Any]) -> Any:
        if self.unusable:
            return None
        if directory not in self._made:
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                self.unusable = True
                return self._report(_directory_problem(directory, exc))
            self._made.add(directory)
        try:
            return work()
        except OSError as exc:
            self._made.discard(directory)  # removed under us? made again at the next turn
            return self._report(f"habitat: cannot write log files in {str(directory)!r} "
                                f"({type(exc).__name__}: {exc}); the previous files are intact")

    def _report(self, message: str) -> None:
        if not self.reported:
            self.reported = True
            raise LogDirError(message)
        return None


class json_handler:  # noqa: N801  (named like torch.profiler.tensorboard_trace_handler)
    """Saves the forecast (trace included, see Forecast.save) to `path` every `every` steps
    (the first step included) and at close(); the file is replaced atomically, so a crash
    leaves the previous version. `every_s` (optional) also saves when that many seconds passed.
    The file holds the totals of the `last_steps` latest steps (None: all; a long run's every
    step is in steps.jsonl), so a save costs the same at step 100 and at step 100,000."""

    def __init__(self, path: PathLike, *, every: int = SAVE_EVERY_STEPS,
                 every_s: float | None = SAVE_EVERY_S, last_steps: int | None = SAVED_STEP_TOTALS,
                 run: str | None = None, _guard: _Guard | None = None) -> None:
        if int(every) < 1:
            raise ValueError(f"json_handler(every=N) takes N >= 1 steps, got {every!r}")
        self.path = Path(path)
        # With `run`: the file is shared by the runs of a log_dir. The first run to save claims
        # it (a lock held until close()); a run that finds it claimed saves to <dir>/<run>/
        # instead of overwriting the other run's forecast.
        self.run = run
        self._claim: int | None = None  # the lock's descriptor while this run owns `path`
        self._claimed = run is None
        self.every = int(every)
        self.last_steps = last_steps  # totals of the latest steps only (None: every step)
        self.every_s = every_s
        self._since_save = 0
        self._last_save = 0.0
        self._saved_steps = -1
        self._forecast: Forecast | None = None
        self._guard = _guard or _Guard()

    def __call__(self, forecast: Forecast, step: StepForecast) -> None:
        self._forecast = forecast
        self._since_save += 1
        now = time.monotonic()
        due = (self._saved_steps < 0 or self._since_save >= self.every
               or (self.every_s is not None and now - self._last_save >= self.every_s))
        if due:
            self._save(forecast)

    def catch_up(self, forecast: Forecast, step: StepForecast) -> None:
        """A step whose other sinks were coalesced (predict_on holds them to a share of the
        training time): saved when a save is due by steps, but at most once a second, so
        the file stays within SAVE_EVERY_STEPS steps or a second of steps.jsonl."""
        self._forecast = forecast
        self._since_save += 1
        if self._since_save >= self.every and time.monotonic() - self._last_save >= CATCH_UP_S:
            self._save(forecast)

    def _save(self, forecast: Forecast) -> None:
        self._since_save = 0
        self._last_save = time.monotonic()
        self._saved_steps = len(forecast._steps)
        self._guard.run(self.path.parent, lambda: forecast.save(self._target(), last_steps=self.last_steps))

    def _target(self) -> Path:
        """Where this run saves: `path`, or <dir>/<run>/<name> while another run owns it."""
        if self._claimed:
            return self.path
        if self._claim is None:
            self._claim = _claim(self.path)
            if self._claim is None:
                alternative = self.path.parent / str(self.run) / self.path.name
                alternative.parent.mkdir(parents=True, exist_ok=True)
                warnings.warn(f"habitat: another run in {str(self.path.parent)!r} is writing "
                              f"{self.path.name}; this run's forecast goes to {str(alternative)!r}",
                              LogDirWarning, stacklevel=2)
                self._claimed = True
                self.path = alternative
                return alternative
        return self.path

    def close(self) -> None:
        """Writes the last steps; never raises (a failure is printed to stderr)."""
        forecast = self._forecast
        try:
            if forecast is not None and forecast._steps and self._saved_steps != len(forecast._steps):
                self._save(forecast)
        except Exception as e:  # closing must not raise into the user's code
            _report_on_close(e)
        finally:
            self._release()

    def _release(self) -> None:
        claim, self._claim = self._claim, None
        if claim is not None and claim >= 0:
            os.close(claim)  # the lock goes with it: a later run may claim the file


def _claim(path: Path) -> int | None:
    """An exclusive lock on `path` among the runs of its folder (a lock file beside it, held
    open), or None when another live run holds it. Where locks do not exist, every run claims."""
    if fcntl is None:
        return -1
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent / f".{path.name}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


class history_handler:  # noqa: N801
    """Appends one JSON line per step to `path` (append-only): the step's totals
    (``StepForecast.summary()``) with the run name, written as the step is forecast, so a
    crash loses nothing already written. Read it with
    :func:`habitat.data.forecast.read_step_history`."""

    def __init__(self, path: PathLike, *, run: str | None = None, sync_every: int = 100,
                 _guard: _Guard | None = None) -> None:
        self.path = Path(path)
        self.run = run or run_name()
        self.sync_every = max(1, int(sync_every))
        self._log: LineLog | None = None
        self._lines = 0
        self._guard = _guard or _Guard()

    def __call__(self, forecast: Forecast, step: StepForecast) -> None:
        def append() -> None:
            if self._log is None:
                self._log = LineLog(self.path)
            self._log.append(json.dumps({"run": self.run, **step.summary()},
                                        separators=(",", ":")))
            self._lines += 1
            if self._lines % self.sync_every == 0:
                self._log.sync()  # against power loss; a killed process loses nothing anyway

        self._guard.run(self.path.parent, append)

    def close(self) -> None:
        log, self._log = self._log, None
        if log is not None:
            try:
                log.close()
            except Exception as e:
                _report_on_close(e)


class tensorboard_handler:  # noqa: N801
    """Logs each step to TensorBoard in `log_dir` (see present.tensorboard.TensorBoardLogger),
    or in `log_dir/run` when a run name is given (``log_dir_sinks`` gives each predict_on its
    own, so runs sharing a log_dir are told apart); the writer opens at the first step and
    closes at close(). Options (``detail_every``, ``top_ops``) go to the logger."""

    def __init__(self, log_dir: PathLike, *, run: str | None = None, _guard: _Guard | None = None,
                 **options: Any) -> None:
        self.run = run or ""
        self.log_dir = Path(log_dir) / self.run if self.run else Path(log_dir)
        self.options = options
        self._logger: TensorBoardLogger | None = None
        self._guard = _guard or _Guard()

    def __call__(self, forecast: Forecast, step: StepForecast) -> None:
        def log() -> None:
            if self._logger is None:
                self._logger = TensorBoardLogger(self.log_dir, **self.options)
            self._logger.log_step(forecast, step)

        self._guard.run(self.log_dir, log)

    def log_scalars(self, forecast: Forecast, step: StepForecast) -> None:
        """The step's scalars only, one event record (a few microseconds): what predict_on
        writes for the steps whose other sinks are coalesced, so TensorBoard has every step."""
        def log() -> None:
            if self._logger is None:
                self._logger = TensorBoardLogger(self.log_dir, **self.options)
            self._logger.log_scalars(step)

        self._guard.run(self.log_dir, log)

    def close(self) -> None:
        logger, self._logger = self._logger, None
        if logger is not None:
            try:
                logger.close()
            except Exception as e:
                _report_on_close(e)


_run_counter = itertools.count()


def run_name() -> str:
    """A run name unique to this predictor: start time, process id and a counter."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-pid{os.getpid()}-{next(_run_counter)}"


def log_dir_sinks(log_dir: PathLike, *, run: str | None = None,
                  save_every: int = SAVE_EVERY_STEPS, **tensorboard: Any) -> list[StepSink]:
    """What ``predict_on(..., log_dir=...)`` does: forecast.json every `save_every` steps and
    at close, steps.jsonl every step, TensorBoard in ``log_dir/run``. One failure report for
    the three (see :class:`LogDirError`)."""
    log_dir = Path(log_dir)
    run = run or run_name()
    guard = _Guard()
    # The history first: a process killed between the two writes then leaves every step of
    # forecast.json in steps.jsonl too.
    return [history_handler(log_dir / HISTORY_FILE, run=run, _guard=guard),
            json_handler(log_dir / FORECAST_FILE, every=save_every, run=run, _guard=guard),
            tensorboard_handler(log_dir, run=run, _guard=guard, **tensorboard)]


def _report_on_close(exc: Exception) -> None:
    import sys

    print(f"habitat: could not write the last log files ({type(exc).__name__}: {exc})",
          file=sys.stderr)
