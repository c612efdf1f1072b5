"""What predict_on reads from the machine and torch as it starts and as steps end: the memory
available for one step's records, the host, the precision switches in force (the trace
origin), the GPU a captured step ran on, and the CUDA allocator's peak during a step."""
from __future__ import annotations

import os
import platform
from typing import Any, Callable

import torch

from habitat import _engine
from habitat._version import __version__
from habitat.capture.cupti import origin_device

#: Most ops recorded in one step by default, on a machine with memory to spare; the rest run
#: untouched and are counted as dropped. The default is lower where memory is short (see
#: default_max_ops_per_step).
DEFAULT_MAX_OPS_PER_STEP = 2_000_000
#: Fewest ops the default records, however little memory is free.
MIN_DEFAULT_MAX_OPS = 100_000
#: Bytes a recorded op holds until its step is forecast (C++ records of its arguments,
#: shapes and names): measured at 6.9 KB per op on a CPU capture of 200k ops (benchmarks/
#: scale/scale.py); rounded up.
BYTES_PER_RECORDED_OP = 8 * 1024
#: Share of the memory available when predict_on starts that one step's records may use.
RECORD_MEMORY_SHARE = 0.25


def available_memory() -> int | None:
    """Bytes of memory available now (MemAvailable on Linux); None when unknown."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def default_max_ops_per_step() -> int:
    """Ops one step records by default: as many as fit in a quarter of the memory available
    now (BYTES_PER_RECORDED_OP each), between MIN_DEFAULT_MAX_OPS and DEFAULT_MAX_OPS_PER_STEP,
    so a runaway step cannot exhaust the machine's memory."""
    available = available_memory()
    if available is None:
        return DEFAULT_MAX_OPS_PER_STEP
    fits = int(available * RECORD_MEMORY_SHARE) // BYTES_PER_RECORDED_OP
    return max(MIN_DEFAULT_MAX_OPS, min(DEFAULT_MAX_OPS_PER_STEP, fits))


def _host() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.node()


def _autocast_enabled() -> bool:
    return any(torch.is_autocast_enabled(device) for device in ("cpu", "cuda"))


def _autocast_dtype() -> str:
    """The dtype autocast casts to ("bfloat16"), "" when off; CUDA's region wins over CPU's,
    as in the capture plugin's per-op reading."""
    for device in ("cuda", "cpu"):
        if torch.is_autocast_enabled(device):
            return str(torch.get_autocast_dtype(device)).removeprefix("torch.")
    return ""


def _read_switch(read: Callable[[], Any], on_conflict: Any) -> Any:
    """A legacy precision getter; torch (2.9+) raises when the program set the newer
    fp32_precision API so that the two disagree: the legacy state is then the default, so the
    new API changed it (as the capture plugin reads it, torch_compat.h)."""
    try:
        return read()
    except RuntimeError:
        return on_conflict


def precision_flags() -> dict[str, Any]:
    """The precision switches in force now, as the trace origin records them (format 2)."""
    return {
        "allow_tf32": bool(_read_switch(lambda: torch.backends.cuda.matmul.allow_tf32, True)),
        "autocast": _autocast_enabled(),
        "cudnn_allow_tf32": bool(_read_switch(lambda: torch.backends.cudnn.allow_tf32, True)),
        "float32_matmul_precision": _read_switch(torch.get_float32_matmul_precision, "high"),
        "autocast_dtype": _autocast_dtype(),
    }


def trace_origin(device: str = "cpu") -> dict[str, Any]:
    """The origin of a trace captured here now: device, host, versions, precision switches."""
    return {
        "device": device,
        "host": _host(),
        "torch_version": torch.__version__,
        "habitat_version": __version__,
        **precision_flags(),
    }


def gpu_of(captured: Any) -> str | None:
    """The database name of the first CUDA device the captured step's ops touched, if any."""
    device = _engine.captured_cuda_device(captured.capsule)
    if device is None:
        return None
    return origin_device(int(device.split(":")[1]) if ":" in device else 0)


class AllocatorPeak:
    """The CUDA caching allocator's peak during a step, read without resetting the user's
    peak statistics: exact when the step set a new peak, unknown (None) otherwise."""

    def __init__(self) -> None:
        self._before: int | None = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self._before = torch.cuda.max_memory_allocated()

    def step_peak(self) -> int | None:
        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return None
        after = torch.cuda.max_memory_allocated()
        return after if self._before is None or after > self._before else None

