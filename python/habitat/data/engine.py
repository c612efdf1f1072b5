"""Thin bridge to the C++ predictor: trace documents in, forecast documents out."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from habitat import _engine
from habitat.data.input_files import read_input_bytes
from habitat.data.op_rows import OpRows

TRACE_FORMAT: str = _engine.TRACE_FORMAT_NAME
#: The trace format version written: the engine's own (Trace::kFormatVersion), one source.
TRACE_VERSION: int = _engine.TRACE_FORMAT_VERSION


def trace_document(origin: dict[str, Any], steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A trace document (docs/trace-format.md) holding `steps`."""
    return {"format": TRACE_FORMAT, "version": TRACE_VERSION, "origin": origin, "steps": list(steps)}


class SettingError(RuntimeError):
    """An environment variable (HABITAT_WEIGHTS, HABITAT_HOST_MODEL) that does not name what it
    should: the message names the variable and the fix. Not a ValueError, so that no caller
    takes it for a problem of the trace being read."""


def weights_dir() -> str:
    """The learned models' directory; HABITAT_WEIGHTS overrides it, and an empty value
    turns the learned models off (shape-based forecasts then use the roofline alone). A value
    that names no folder is an error: forecasts would silently fall back to the roofline."""
    if "HABITAT_WEIGHTS" in os.environ:
        value = os.environ["HABITAT_WEIGHTS"]
        if value and not Path(value).is_dir():
            raise SettingError(f"HABITAT_WEIGHTS={value!r} names no folder: point it at a weights "
                               "folder (laid out like habitat/weights), set it empty to turn the "
                               "learned models off, or unset it")
        return value
    packaged = Path(__file__).parents[1] / "weights"  # installed: pyproject.toml maps weights/ here
    source_tree = Path(__file__).parents[3] / "weights"
    return str(packaged if packaged.is_dir() else source_tree)


#: The eager-PyTorch host model the timeline uses for CPU-traced steps (see
#: habitat/analysis/host_model.py, calibrate_inclusive, for how it is calibrated). On by
#: default: on the eight benchmark workloads traced on a CPU, each forecast with a model
#: calibrated without that workload, the step as seen was 11.8% (mean abs.) off the measured
#: H100 step and 29% off the H200 machine's, whose host is slower, against 34% and 46% for the
#: kernel sum (benchmarks/results/timeline-cpu-origin.md). HABITAT_HOST_MODEL names another
#: host model file; "off" (or an empty value) turns it off, so that a CPU-traced step's
#: forecast is its kernel sum.
HOST_MODEL_FILE = Path(__file__).with_name("host_model.json")
_host_model_text: dict[str, str] = {}


def host_model_json() -> str:
    path = os.environ.get("HABITAT_HOST_MODEL", "packaged")
    if path in ("", "off"):
        return ""
    if path == "packaged":
        path = str(HOST_MODEL_FILE)
    if path not in _host_model_text:
        fix = "set HABITAT_HOST_MODEL to a host model JSON file, to 'packaged' (the default), or to 'off'"
        try:  # the packaged model is Habitat's own: not held to the cap on users' inputs
            text = (HOST_MODEL_FILE.read_text(encoding="utf-8") if Path(path) == HOST_MODEL_FILE
                    else read_input_bytes(path, "host model").decode("utf-8"))
            _engine.validate_host_model(text)
        except (OSError, ValueError) as e:  # unreadable, not UTF-8, not a host model
            raise SettingError(f"host model '{path}' cannot be used ({e}): {fix}") from None
        _host_model_text[path] = text
    return _host_model_text[path]


def check_host_speed(host_speed: float) -> float:
    """host_speed: the host's speed relative to the origin's host (1.0: the same host)."""
    try:
        value = float(host_speed)
    except (TypeError, ValueError):
        raise ValueError(f"host_speed must be a number > 0 (1.0 = the origin's host), got {host_speed!r}") from None
    if not (value > 0 and value != float("inf")):
        raise ValueError(f"host_speed must be a finite number > 0 (1.0 = the origin's host), got {host_speed!r}")
    return value


def forecast_step(origin: dict[str, Any], step: dict[str, Any], targets: Sequence[str],
                  host_speed: float = 1.0) -> dict[str, Any]:
    """Runs the engine on one step (a trace step dict) for each target GPU: the whole
    forecast document, per-op detail included (one dict per op: for large steps use
    forecast_step_parts, whose rows are columns)."""
    summary, rows = forecast_step_parts(origin, step, targets, host_speed)
    return {**summary, "ops": rows.records()}


def forecast_step_parts(origin: dict[str, Any], step: dict[str, Any], targets: Sequence[str],
                        host_speed: float = 1.0) -> tuple[dict[str, Any], OpRows]:
    """Runs the engine on one step: (the forecast document without its ops, the per-op
    forecasts as columns, read only when per-op detail is)."""
    summary, rows = _engine.forecast_step_parts(trace_document(origin, [step]), list(targets), weights_dir(),
                                                check_host_speed(host_speed), host_model_json())
    return summary, OpRows(rows, summary["targets"])


def forecast_trace(trace: str | bytes | bytearray | dict[str, Any], targets: Sequence[str], host_speed: float = 1.0) -> tuple[dict[str, Any], list[tuple[Any, int, float, dict[str, Any], OpRows]]]:
    """Reads a trace document once (a dict, handed to the engine as it is, or its JSON text)
    and forecasts every step: (its origin, [(step capsule, index, wall_ms, forecast document
    without ops, per-op rows)]). Raises TraceFormatError naming the first invalid field."""
    origin_json, steps = _engine.forecast_trace(trace, list(targets), weights_dir(),
                                                check_host_speed(host_speed), host_model_json())
    origin = json.loads(origin_json)["origin"]
    return origin, [(c, i, w, summary, OpRows(rows, summary["targets"]))
                    for c, i, w, summary, rows in steps]


def forecast_captured(capsule: Any, origin: dict[str, Any], targets: Sequence[str],
                      host_speed: float = 1.0, steady_wall_ms: float = 0.0) -> tuple[dict[str, Any], OpRows]:
    """Forecasts a step captured by habitat._C: (the forecast document without its ops, the
    per-op rows). `steady_wall_ms` > 0: the wall time of the same step run without recording,
    to which the timeline calibrates the origin's host (csrc/src/predict/timeline_calibrate.cpp)."""
    origin_doc = json.dumps(trace_document(origin, []))
    summary, rows = _engine.forecast_captured(capsule, origin_doc, list(targets), weights_dir(),
                                              check_host_speed(host_speed), host_model_json(),
                                              steady_wall_ms)
    return summary, OpRows(rows, summary["targets"])


def step_of_capsule(capsule: Any) -> dict[str, Any]:
    """The trace step dict of a step the engine holds (a capsule from forecast_trace)."""
    return json.loads(_engine.captured_trace_json(capsule))["steps"][0]
