"""Device figures for the learned models, read from habitat/data/devices.json.

The JSON file is the single source of GPU figures (the C++ DeviceDatabase reads the same
file); nothing here repeats a figure. Names are matched under the engine's key
(habitat._engine.device_name_key, the one DeviceDatabase::find uses), so a GPU name means here
what it means to a forecast: case, separators and vendor words are ignored. A table file may
hold partial entries (only what the learned features need), which the engine would refuse.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from habitat import _engine

DEFAULT_DB = Path(__file__).resolve().parent.parent / "data" / "devices.json"

# Matrix-work precisions fall back to the FP32 SIMT peak when a GPU has no units for them,
# as Device::peak_flops does in the engine.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp64")


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    sms: int
    clock_mhz: float
    bandwidth_gbs: float
    l2_mb: float
    peak_tflops: dict[str, float] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    def peak_flops(self, precision: str = "fp32") -> float:
        value = self.peak_tflops.get(precision) or self.peak_tflops["fp32"]
        return float(value) * 1e12


def _entries(document: object) -> list[dict]:
    if isinstance(document, dict):
        for key in ("devices", "gpus"):
            if isinstance(document.get(key), list):
                return document[key]
        if isinstance(document.get("devices"), dict):
            return [dict(v, name=k) for k, v in document["devices"].items()]
    if isinstance(document, list):
        return document
    raise ValueError("devices.json: expected a list of devices or {\"devices\": [...]}")


def _spec(entry: dict) -> DeviceSpec:
    peaks = entry.get("peak_tflops") or {}
    return DeviceSpec(
        name=entry["name"],
        sms=int(entry["sms"]),
        clock_mhz=float(entry.get("boost_clock_mhz", 0.0)),
        bandwidth_gbs=float(entry["memory_bandwidth_gbs"]),
        l2_mb=float(entry["l2_mb"]),
        peak_tflops={str(k): float(v) for k, v in peaks.items() if v},
        aliases=tuple(entry.get("aliases", ())) + tuple(
            x for x in (entry.get("display_name"),) if x),
    )


class DeviceTable:
    def __init__(self, devices: list[DeviceSpec], path: str | Path = DEFAULT_DB):
        self.devices = devices
        self.path = str(path)
        self._index: dict[str, DeviceSpec] = {}
        for d in devices:
            for n in (d.name, *d.aliases):
                self._index.setdefault(_engine.device_name_key(n), d)

    @classmethod
    def load(cls, path: str | Path = DEFAULT_DB) -> "DeviceTable":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"device database not found at {path}")
        return cls([_spec(e) for e in _entries(json.loads(path.read_text()))], path)

    def find(self, name: str) -> DeviceSpec:
        d = self.try_find(name)
        if d is None:
            known = ", ".join(sorted(x.name for x in self.devices))
            raise KeyError(f"unknown GPU {name!r}: add it to devices.json (known: {known})")
        return d

    def try_find(self, name: str) -> DeviceSpec | None:
        key = _engine.device_name_key(name)
        return self._index.get(key) if key else None


@lru_cache(maxsize=4)
def default_table(path: str = str(DEFAULT_DB)) -> DeviceTable:
    return DeviceTable.load(path)
