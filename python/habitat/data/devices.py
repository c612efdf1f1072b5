"""The GPUs Habitat can forecast for.

The database is the packaged ``habitat/data/devices.json`` (every figure cites its source),
loaded into the C++ engine at import, plus any user files: those named in the environment
variable ``HABITAT_DEVICES`` (paths separated by ``os.pathsep``) and those passed to
:func:`load_devices`. A user file has the same layout; an entry whose name matches a known
GPU updates only the fields it gives, a new name must give every field::

    {"devices": [{"name": "A100", "memory_bandwidth_gbs": 1800},
                 {"name": "A10G", "compute_capability": "8.6", "sms": 80, "boost_clock_mhz": 1710,
                  "memory_gb": 24, "memory_bandwidth_gbs": 600, "l2_mb": 6, "tdp_w": 300,
                  "peak_tflops": {"fp32": 35.0}}]}

Names are forgiving: case, spaces, dashes, underscores and the NVIDIA/Tesla/GeForce words do
not matter, so ``torch.cuda.get_device_name()`` strings work. Short family names resolve to
the most common cloud part: ``A100`` = A100 SXM4 80GB, ``A100-PCIe`` = A100 PCIe 80GB,
``H100`` = H100 SXM5, ``V100`` = V100 SXM2 16GB, ``P100`` = P100 PCIe 16GB.
"""
from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path

from habitat import _engine

Device = _engine.Device
UnknownDeviceError = _engine.UnknownDeviceError

PACKAGED_DEVICES = Path(__file__).resolve().parent / "devices.json"
ENV_VAR = "HABITAT_DEVICES"

__all__ = [
    "Device",
    "UnknownDeviceError",
    "devices",
    "format_devices_table",
    "get_device",
    "load_devices",
]

_user_files: list[str] = []


def _env_files() -> list[str]:
    """The readable files named in HABITAT_DEVICES; a bad entry is a warning, not a crash."""
    files = []
    for entry in os.environ.get(ENV_VAR, "").split(os.pathsep):
        if not entry.strip():
            continue
        path = Path(entry).expanduser()
        if path.is_file():
            files.append(str(path))
        else:
            warnings.warn(f"{ENV_VAR} names {entry!r}, which is not a file: it is ignored "
                          f"(fix or unset {ENV_VAR})", stacklevel=3)
    return files


def _load() -> None:
    """(Re)loads the packaged database, then the user files in order."""
    user_files = [*_env_files(), *_user_files]
    try:
        _engine.load_device_database(str(PACKAGED_DEVICES), user_files)
    except RuntimeError as exc:
        if not user_files:
            raise
        # A broken user file must not leave Habitat without GPUs: keep the packaged ones.
        _engine.load_device_database(str(PACKAGED_DEVICES), [])
        warnings.warn(f"ignored the user device files {user_files}: {exc}", stacklevel=3)


def devices() -> list[Device]:
    """Every known GPU, in database order."""
    return list(_engine.all_devices())


def get_device(name: str | Device) -> Device:
    """The GPU a name refers to (forgiving: "a100", "NVIDIA A100-SXM4-80GB", "Tesla_T4").

    Raises UnknownDeviceError (a ValueError) listing the closest known names.
    """
    if isinstance(name, Device):
        return name
    return _engine.find_device(str(name))


def load_devices(path: str | os.PathLike[str]) -> list[Device]:
    """Adds or overrides GPUs from a JSON file in the devices.json layout.

    The file stays in effect for the rest of the process. Raises ValueError naming the file,
    the device and the field when the file is malformed; the database is then unchanged.
    Returns the devices the file names.
    """
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read device file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        _engine.merge_devices_json(text)
    except RuntimeError as exc:
        raise ValueError(f"{exc} (in {path})") from None
    _user_files.append(str(path))
    return _named_in(text)


def _named_in(text: str) -> list[Device]:
    entries = json.loads(text).get("devices", [])
    return [get_device(e["name"]) for e in entries if isinstance(e, dict) and "name" in e]


def _number(value: float) -> str:
    return f"{value:g}"


def format_devices_table(devs: Iterable[Device]) -> str:
    """A fixed-width table of the devices: name, CC, SMs, clock, memory, bandwidth, peaks."""
    header = ["GPU", "CC", "SMs", "MHz", "Mem GB", "BW GB/s", "L2 MB", "TDP W",
              "FP32", "TF32", "BF16", "FP16", "FP8"]
    rows = [header]
    for d in devs:
        peaks = d.peak_tflops
        rows.append([
            d.name, d.compute_capability, str(d.sms), _number(d.boost_clock_mhz),
            _number(d.memory_gb), _number(d.memory_bandwidth_gbs), _number(d.l2_mb),
            _number(d.tdp_w),
            *(_number(peaks[p]) if p in peaks else "-" for p in ("fp32", "tf32", "bf16", "fp16", "fp8")),
        ])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("Peaks in dense TFLOPS; '-' = no faster units than FP32 (the FP32 peak is used). "
                 "Sources and caveats: habitat/data/devices.json.")
    return "\n".join(lines)


_load()
