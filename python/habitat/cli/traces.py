"""The TRACE argument: a file, a ``log_dir`` or ``-`` (standard input), checked, read and
forecast, each problem reported as a `UserError` naming the file and the fix.

The commands call `read_trace` and `forecast_file` through this module (``traces.read_trace``),
so that tests can check no trace is read before the arguments are."""
from __future__ import annotations

import argparse
import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from habitat.cli.errors import PROG, UserError

if TYPE_CHECKING:
    from habitat.data.forecast import Forecast


def trace_argument(path: str) -> str:
    """The trace file a TRACE argument names: a folder stands for its ``forecast.json`` (a
    ``predict_on(..., log_dir=...)``, or a folder holding one run's); a step history
    (``steps.jsonl``) is named for what it is, with the file to give instead."""
    from habitat.capture.sinks import FORECAST_FILE, HISTORY_FILE

    p = Path(path)
    if p.is_dir():
        if (p / FORECAST_FILE).is_file():
            return str(p / FORECAST_FILE)
        runs = sorted(str(f) for f in p.glob(f"*/{FORECAST_FILE}"))
        if len(runs) == 1:
            return runs[0]
        if runs:
            raise UserError(f"{path!r} holds several runs: name one, e.g. {PROG} compare {runs[0]} "
                            f"(found {', '.join(runs)})")
        raise UserError(f"{path!r} is a folder without a {FORECAST_FILE}: give a trace file saved "
                        "with forecast.save('step.json'), or the log_dir of "
                        "habitat.predict_on(..., log_dir=...)")
    if p.name == HISTORY_FILE or p.suffix == ".jsonl":
        beside = p.with_name(FORECAST_FILE)
        raise UserError(f"{path!r} is a step history (one line of totals per step), not a trace: "
                        + (f"give {str(beside)!r} or its folder instead" if beside.is_file() else
                           f"give the {FORECAST_FILE} of the same log_dir, or a trace saved with "
                           "forecast.save('step.json')"))
    return path


def check_trace_path(path: str) -> Path:
    """The trace file, checked before any work: it exists, is a regular file and is readable
    (each problem named with its fix)."""
    from habitat.data.input_files import InputLimitError, open_input

    p = Path(path)
    try:
        os.stat(p)
    except FileNotFoundError:
        raise UserError(f"trace file {path!r} does not exist: check the path (save one with "
                        "forecast.save('trace.json'), or habitat.predict_on(..., log_dir='runs/x') "
                        "writes runs/x/forecast.json)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"trace file {path!r} is a symbolic link that loops (it leads back to "
                            "itself): point it at the trace file") from None
        raise UserError(f"cannot read trace file {path!r}: {exc.strerror or exc}") from None
    if p.is_dir():
        raise UserError(f"{path!r} is a directory: give the trace file (a .json saved by Habitat)")
    try:
        open_input(p, "trace file").close()
    except PermissionError:
        raise UserError(f"cannot read trace file {path!r}: permission denied; make it readable "
                        f"(chmod +r {path}) or copy it somewhere you can read") from None
    except (OSError, InputLimitError) as exc:
        raise UserError(str(exc)) from None
    return p


@contextlib.contextmanager
def trace_from_stdin(args: argparse.Namespace) -> Iterator[None]:
    """TRACE given as ``-``: standard input, read once (within the input cap, decompressed
    when gzip) into a temporary file that every reading of the command uses, removed after."""
    if getattr(args, "trace", None) != "-":
        yield
        return
    from habitat.data.input_files import STDIN, read_input_bytes

    try:
        data = read_input_bytes(STDIN, "trace from standard input")
    except (OSError, ValueError) as exc:
        raise UserError(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="habitat-stdin-") as folder:
        path = os.path.join(folder, "trace.json")
        with open(path, "wb") as f:
            f.write(data)
        del data
        args.trace = path
        try:
            yield
        finally:
            args.trace = "-"


def read_trace(path: str) -> dict[str, Any]:
    """The trace document (every step's ops as Python objects), with a status line."""
    p = check_trace_path(path)
    from habitat.data.trace import load_trace
    from habitat.present.progress import status

    try:
        with status(f"loading {path} ({p.stat().st_size / 1e6:.1f} MB)"):
            return load_trace(p)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        message = str(exc)
        # Trace errors already name the file; other errors get it added.
        raise UserError(message if path in message else f"cannot read trace {path!r}: {message}") from None


def forecast_file(path: str, targets: list[str], host_speed: float = 1.0, *,
                  keep_all: bool = False) -> "Forecast":
    """Forecasts every step of the trace file: read once, parsed and forecast by the engine
    (no Python object per op unless an output reads per-op detail); a status line on stderr
    when it takes over a second."""
    from habitat.data.engine import SettingError
    from habitat.data.forecast import DEFAULT_KEEP_STEPS, Forecast
    from habitat.present.progress import status

    keep_steps = None if keep_all else DEFAULT_KEEP_STEPS  # keep_all: every step's detail (--save)
    p = check_trace_path(path)
    try:
        with status(f"forecasting {path} ({p.stat().st_size / 1e6:.1f} MB) for {len(targets)} GPU(s)"):
            forecast = Forecast.load(p, targets=targets, host_speed=host_speed, keep_steps=keep_steps)
    except SettingError as exc:  # HABITAT_WEIGHTS, HABITAT_HOST_MODEL: not the trace's fault
        raise UserError(str(exc)) from None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        message = str(exc)
        raise UserError(message if path in message else f"cannot read trace {path!r}: {message}") from None
    if not forecast.steps:
        raise UserError(f"trace {path!r} holds no step: capture at least one training step")
    return forecast


def forecast_steps(doc: dict[str, Any], targets: list[str], path: str, *,
                   log_dir: str | None = None, keep_all: bool = False) -> "Forecast":
    """Forecasts every step of the trace document with a progress bar, each logged to
    TensorBoard in `log_dir` as it is forecast."""
    from habitat.data.forecast import DEFAULT_KEEP_STEPS, Forecast
    from habitat.present.progress import progress

    chosen = doc["steps"]
    if not chosen:
        raise UserError(f"trace {path!r} holds no step: capture at least one training step")
    forecast = Forecast(targets, doc["origin"], keep_steps=None if keep_all else DEFAULT_KEEP_STEPS)
    logger = None
    if log_dir is not None:
        from habitat.present.tensorboard import TensorBoardLogger

        try:
            logger = TensorBoardLogger(log_dir)
        except ImportError as exc:
            raise UserError(str(exc)) from None
    try:
        for step in progress(chosen, desc=f"forecasting {len(targets)} GPU(s)"):
            try:
                fc = forecast.add_step(step)
            except (ValueError, RuntimeError) as exc:
                raise UserError(f"cannot forecast step {step.get('index', '?')} of {path!r}: {exc}") from None
            if logger is not None:
                logger.log_step(forecast, fc)
    finally:
        if logger is not None:
            logger.close()
    return forecast
