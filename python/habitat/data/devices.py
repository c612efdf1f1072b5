"""The GPUs Habitat can forecast for.

The database is the packaged ``habitat/data/devices.json`` (every figure cites its source),
loaded into the C++ engine at import, plus any user files: those named in the environment
variable ``HABITAT_DEVICES`` (paths separated by ``os.pathsep``) and those passed to
:func:`load_devices`. A user file has the same layout; an entry whose name matches a known
GPU updates only the fields it gives, a new name must give every field::

    {"devices": [{"name": "A100", "memory_bandwidth_gbs": 1800},
                 {"name": "RTX-A6000", "compute_capability": "8.6", "sms": 84,
                  "boost_clock_mhz": 1800, "memory_gb": 48, "memory_bandwidth_gbs": 768,
                  "l2_mb": 6, "tdp_w": 300, "peak_tflops": {"fp32": 38.7}}]}

Names are forgiving: case, spaces, dashes, underscores and the NVIDIA/Tesla/GeForce words do
not matter, so ``torch.cuda.get_device_name()`` strings work. Short family names resolve to
the most common cloud part: ``A100`` = A100 SXM4 80GB, ``A100-40G`` = A100 SXM4 40GB,
``A100-PCIe`` = A100 PCIe 80GB, ``H100`` = H100 SXM5, ``V100`` = V100 SXM2 16GB, ``P100`` = P100
PCIe 16GB; ``A10G`` (AWS g5) is forecast with the A10's figures (devices.json says why).
"""
from __future__ import annotations

import json
import os
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
    "check_devices",
    "devices",
    "format_devices_table",
    "get_device",
    "load_devices",
    "target_names",
]

_user_files: list[str] = []
_load_error: ValueError | None = None


def _env_files() -> list[str]:
    """The files named in HABITAT_DEVICES; an entry that is not a file is an error."""
    files = []
    for entry in os.environ.get(ENV_VAR, "").split(os.pathsep):
        if not entry.strip():
            continue
        path = Path(entry).expanduser()
        if not path.is_file():
            raise ValueError(f"{ENV_VAR} names {entry!r}, which is not a file: fix the path "
                             f"or unset {ENV_VAR} (the built-in GPU figures would be used)")
        files.append(str(path))
    return files


def _load() -> None:
    """(Re)loads the packaged database, then the user files in order.

    A broken user file is an error (ValueError naming the file and the field), never silently
    replaced by the built-in figures: forecasts for GPUs the user redefined would be wrong.
    The packaged database stays loaded, so ``habitat.devices()`` still works after the error.
    """
    global _load_error
    _load_error = None
    try:
        user_files = [*_env_files(), *_user_files]
    except ValueError as exc:
        _engine.load_device_database(str(PACKAGED_DEVICES), [])
        _load_error = exc
        raise
    try:
        _engine.load_device_database(str(PACKAGED_DEVICES), user_files)
    except RuntimeError as exc:
        if not user_files:
            raise
        _engine.load_device_database(str(PACKAGED_DEVICES), [])
        _load_error = ValueError(f"invalid device file in {user_files}: {exc}; fix it or unset "
                                 f"{ENV_VAR}")
        raise _load_error from None


def check_devices() -> None:
    """Raises ValueError when a device file (HABITAT_DEVICES or load_devices) was invalid."""
    _check_loaded()


def _check_loaded() -> None:
    """Raises the error of a broken HABITAT_DEVICES file found at import (so that importing
    habitat works, and the first use of the GPU database reports it)."""
    if _load_error is not None:
        raise _load_error


def devices() -> list[Device]:
    """Every known GPU, in database order."""
    _check_loaded()
    return list(_engine.all_devices())


def get_device(name: str | Device) -> Device:
    """The GPU a name refers to (forgiving: "a100", "NVIDIA A100-SXM4-80GB", "Tesla_T4").

    Raises UnknownDeviceError (a ValueError) listing the closest known names.
    """
    if isinstance(name, Device):
        return name
    _check_loaded()
    return _engine.find_device(str(name))


def target_names(targets: object, *, what: str = "targets") -> list[str]:
    """Canonical GPU names from a name, ``"all"`` (every known GPU), a comma-separated string
    or a list of names/Devices, deduplicated in order.

    Anything else (None, 5, an empty list, a list holding a non-name) raises
    UnknownDeviceError (a ValueError) with the same advice as an unknown name.
    """
    hint = (f"{what}: pass a GPU name, a list of names or 'all', e.g. ['A100', 'H100'] "
            "(`habitat devices` lists them)")
    if isinstance(targets, (str, Device)):
        items: list[object] = [targets]
    elif isinstance(targets, (list, tuple, set, frozenset)) or (
            isinstance(targets, Iterable) and not isinstance(targets, (bytes, dict))):
        items = list(targets)
    else:
        raise UnknownDeviceError(f"{hint}; got {targets!r}")
    names: list[str] = []
    for item in items:
        if isinstance(item, Device):
            names.append(item.name)
        elif isinstance(item, str):
            parts = [p.strip() for p in item.split(",") if p.strip()]
            if any(p.lower() == "all" for p in parts):
                names.extend(d.name for d in devices())
            else:
                names.extend(get_device(p).name for p in parts)
        else:
            raise UnknownDeviceError(f"{hint}; got {item!r} in {targets!r}")
    if not names:
        raise UnknownDeviceError(f"{hint}; got no GPU ({targets!r})")
    return list(dict.fromkeys(names))


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



try:
    _load()
except ValueError:
    pass  # kept in _load_error: raised by the first devices() / get_device() call
