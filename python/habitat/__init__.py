"""Habitat: forecast how long a PyTorch training step takes on GPUs you do not have.

The package is in layers (tests/python/test_layout.py checks them)::

    data/      traces, forecasts, the GPU database, the engine bridge (habitat._engine, no torch)
    analysis/  compare, memory, pricing, compiled regions        (imports data)
    present/   text, report, TensorBoard, progress               (imports data and analysis)
    capture/   predict_on, CUPTI, torch.compile (habitat._C)     (imports data and torch)

This module wires them together. It holds the views of :class:`Forecast` that live above the
data layer: ``print(forecast)``, ``forecast.compare()`` and ``forecast.on_clusters()`` call
``_forecast_text``, ``_compare_forecast`` and ``_forecast_on_clusters``, imported below (data
never imports analysis or present; every ``habitat.*`` import runs this module first). It
imports the capture layer only when torch is importable. Without torch, saved traces are
still loaded, forecast, compared and reported; the capture names raise ImportError when used.
"""
from __future__ import annotations

import importlib.util as _importlib_util
import re as _re

from habitat._version import SUPPORTED_TORCH
from habitat._version import __version__ as __version__  # habitat.__version__

# torch first: both extensions share pybind11's internals with torch, and whichever module
# creates them installs the translator that every C++ exception raised in torch passes through.
# Where our extension links its own libstdc++ statically (GCC builds that ship only
# libstdc++.a), a translator from our copy crashes on torch's exceptions (seen on the H100
# machine: a segfault in torch/_ops.py when habitat was imported before torch).
try:
    import torch as _torch
except ImportError:
    _torch = None

from habitat import _engine  # noqa: F401,E402
from habitat.analysis.cluster import Cluster  # noqa: F401
from habitat.analysis.cluster_compare import compare_clusters  # noqa: F401
from habitat.analysis.cluster_compare import forecast_on_clusters as _forecast_on_clusters  # noqa: F401
from habitat.analysis.compare import compare as _compare_forecast  # noqa: F401
from habitat.analysis.memory import estimate_step_memory  # noqa: F401
from habitat.data.devices import Device, devices, get_device, load_devices  # noqa: F401
from habitat.data.forecast import Forecast, StepForecast  # noqa: F401
from habitat.data.trace import load_trace, save_trace, validate_trace  # noqa: F401
from habitat.present.report import write_report  # noqa: F401
from habitat.present.tensorboard import TensorBoardLogger  # noqa: F401
from habitat.present.text import forecast_text as _forecast_text  # noqa: F401

#: The names the capture layer provides; without torch they raise ImportError when used.
CAPTURE_NAMES = ("predict_on", "record_step", "cupti_available", "tensorboard_handler",
                 "json_handler")
_REBUILD = "pip install --no-build-isolation ."


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = (int(x) for x in _re.findall(r"\d+", version)[:2])
    return major, minor


def _torch_problem(running: str) -> str | None:
    """Why this torch cannot run the capture plugin (None when it can), checked before
    habitat._C is loaded: a plugin loaded into an unsupported torch could crash."""
    (lo_major, lo_minor), (hi_major, hi_minor) = SUPPORTED_TORCH
    if _version_tuple(running) < SUPPORTED_TORCH[0]:
        return (f"habitat supports torch {lo_major}.{lo_minor} to {hi_major}.{hi_minor}; this is "
                f"torch {running}: pip install 'torch>={lo_major}.{lo_minor}', then reinstall "
                f"habitat with {_REBUILD}")
    return None


def _load_capture_plugin(running: str) -> None:
    """Imports habitat._C, turning any failure into one ImportError that names the torch
    habitat was built against, the running one, and how to rebuild."""
    try:
        from habitat._build_info import TORCH_VERSION as built_with
    except ImportError:  # a source tree, or a build from before the build recorded it
        built_with = "unknown"
    try:
        from habitat import _C  # noqa: F401
    except ImportError as exc:
        if built_with is None or not _has_plugin_file():
            built = "built without torch, so it has no capture plugin"
        elif built_with == "unknown":
            built = "built against a torch it did not record"
        else:
            built = f"built against torch {built_with}"
        raise ImportError(
            f"habitat's capture plugin (habitat._C) cannot be loaded: habitat was {built}, and "
            f"this is torch {running} ({exc}). Rebuild habitat against the installed torch: "
            f"{_REBUILD}") from exc


def _has_plugin_file() -> bool:
    return _importlib_util.find_spec("habitat._C") is not None


def _missing_torch(name: str):
    message = (f"habitat.{name} needs PyTorch: pip install torch, then reinstall habitat with "
               f"{_REBUILD}")

    def missing(*args, **kwargs):
        raise ImportError(message)

    missing.__name__ = missing.__qualname__ = name
    missing.__doc__ = message
    return missing


if _torch is None:
    TORCH_AVAILABLE = False
    for _name in CAPTURE_NAMES:
        globals()[_name] = _missing_torch(_name)
    del _name
else:
    TORCH_AVAILABLE = True
    _problem = _torch_problem(_torch.__version__)
    if _problem is not None:
        raise ImportError(_problem)
    _load_capture_plugin(_torch.__version__)
    from habitat.capture import compile as _compile  # noqa: F401  (registers backend="habitat")
    from habitat.capture.cupti import cupti_available  # noqa: F401
    from habitat.capture.predict import predict_on, record_step  # noqa: F401
    from habitat.capture.sinks import json_handler, tensorboard_handler  # noqa: F401
