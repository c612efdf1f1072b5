"""The efficiency MLP: numpy inference and the output head shared with the engine.

kernel_us = roofline_us / min(1, efficiency), efficiency = E_MAX * sigmoid(mlp(normalised features)),
time_us   = max(launch_floor_us, kernel_us)
E_MAX > 1 leaves room for datasheet peaks a little below what a GPU reaches (boost clocks,
L2-resident operands); the engine (csrc/src/learned/learned_model.cpp) applies the same head and floor.

The models predict device time (habitat.learned.train): rows timed per call are fitted through
the harness model (habitat.learned.harness), whose floor is host time, not GPU time.
`launch_floor_us` (metadata) is the smallest device time of one kernel on a real GPU;
`harness_floor_us` (metadata, evaluation only) holds the harness floors fitted on NeuSight's
training GPUs, used to compare with NeuSight's rows.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from habitat.learned import extent, harness, safetensors_io
from habitat.learned import features as feats
from habitat.learned.devices import DeviceSpec

E_MAX = 2.0
FORMAT = "habitat-efficiency-mlp"
FORMAT_VERSION = 1


def _log_sigmoid(y: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -y)


@dataclass
class EfficiencyMLP:
    family: str
    mean: np.ndarray          # [F] float32
    std: np.ndarray           # [F] float32
    weights: list[np.ndarray]  # [out, in] float32 per layer
    biases: list[np.ndarray]
    metadata: dict

    def columns(self) -> list[int] | None:
        """Positions of this model's features among features.FEATURE_NAMES[family] (None: all;
        the FP32 SIMT models were trained on the features without the precision ones)."""
        names = list(feats.FEATURE_NAMES[self.family])
        mine = list(self.metadata.get("features", names))
        return None if mine == names else [names.index(n) for n in mine]

    def raw(self, x: np.ndarray) -> np.ndarray:
        cols = self.columns()
        if cols is not None:
            x = x[:, cols]
        h = ((x - self.mean.astype(np.float64)) / self.std.astype(np.float64)).astype(np.float32)
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w.T + b
            if i + 1 < len(self.weights):
                h = np.maximum(h, 0.0)
        return h[:, 0].astype(np.float64)

    @property
    def launch_floor_us(self) -> float:
        return float(self.metadata.get("launch_floor_us", 0.0))

    def kernel_from_features(self, x: np.ndarray, t_roof_us: np.ndarray) -> np.ndarray:
        """Device time without any floor: roofline / efficiency, never below the roofline
        (E_MAX > 1 lets the fit run above the datasheet peak; a forecast does not)."""
        log_eff = np.log(self.metadata.get("e_max", E_MAX)) + _log_sigmoid(self.raw(x))
        return np.maximum(t_roof_us, t_roof_us * np.exp(-log_eff))

    def predict_from_features(self, x: np.ndarray, t_roof_us: np.ndarray) -> np.ndarray:
        return np.maximum(self.launch_floor_us, self.kernel_from_features(x, t_roof_us))

    def predict(self, shapes: dict[str, np.ndarray], dev: DeviceSpec, precision: str = "fp32") -> np.ndarray:
        """What the engine forecasts: one kernel's device time on `dev` (microseconds)."""
        x, t_roof = feats.compute(self.family, shapes, dev, precision)
        names = feats.FEATURE_NAMES[self.family]
        tensor_path = x[:, names.index("tensor_path")] if "tensor_path" in names else np.zeros(len(t_roof))
        if not extent.any_beyond(self.family, shapes, tensor_path):
            return self.predict_from_features(x, t_roof)
        inside = extent.extended_us(self.family, shapes, tensor_path, lambda s: self.predict_from_features(
            *feats.compute(self.family, s, dev, precision)))
        return np.maximum(inside, t_roof)  # at least the whole shape's roofline

    def harness_floor_us(self, ops: np.ndarray) -> np.ndarray:
        """NeuSight's per-call harness floor for each row's op, fitted on the training GPUs
        (their median): a property of that measurement set-up, not of a GPU."""
        floors = self.metadata.get("harness_floor_us", {}).get("median", {})
        fallback = float(np.median(list(floors.values()))) if floors else 0.0
        return np.array([float(floors.get(str(op), fallback)) for op in ops])

    def predict_harness(self, shapes: dict[str, np.ndarray], dev: DeviceSpec, ops: np.ndarray,
                        precision: str = "fp32") -> np.ndarray:
        """What NeuSight's harness would measure: the kernel time behind its floor."""
        x, t_roof = feats.compute(self.family, shapes, dev, precision)
        return harness.harness_time(self.family, self.harness_floor_us(ops), self.kernel_from_features(x, t_roof))

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        tensors = {"norm.mean": self.mean, "norm.std": self.std}
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            tensors[f"layers.{i}.weight"] = w
            tensors[f"layers.{i}.bias"] = b
        safetensors_io.save(directory / f"{self.family}.safetensors", tensors,
                            {"format": FORMAT, "family": self.family})
        (directory / f"{self.family}.json").write_text(json.dumps(self.metadata, indent=1) + "\n")

    @classmethod
    def load(cls, directory: str | Path, family: str) -> "EfficiencyMLP":
        directory = Path(directory)
        tensors, _ = safetensors_io.load(directory / f"{family}.safetensors")
        metadata = json.loads((directory / f"{family}.json").read_text())
        layers = metadata["layers"]
        return cls(family, tensors["norm.mean"], tensors["norm.std"],
                   [tensors[f"layers.{i}.weight"] for i in range(layers)],
                   [tensors[f"layers.{i}.bias"] for i in range(layers)], metadata)


def load_all(directory: str | Path) -> dict[str, EfficiencyMLP]:
    """Every family's model in `directory`, as the engine loads them."""
    directory = Path(directory)
    return {f: EfficiencyMLP.load(directory, f) for f in feats.FAMILIES
            if (directory / f"{f}.safetensors").is_file()}
