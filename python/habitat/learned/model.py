"""The efficiency MLP: numpy inference and the output head shared with the engine.

kernel_us = roofline_us / min(1, efficiency), efficiency = E_MAX * sigmoid(mlp(normalised features)),
time_us   = max(launch_floor_us, kernel_us)
E_MAX > 1 leaves room for datasheet peaks a little below what a GPU reaches (boost clocks,
L2-resident operands); the engine (csrc/learned_model.cpp) applies the same head and floor.

The models are trained floor-free (habitat.learned.train): NeuSight's per-op harness adds a
25-60 us floor per call that is host overhead, not GPU time. `launch_floor_us` (metadata) is
the smallest device time of one kernel on a real GPU; `harness_floor_us` (metadata, evaluation
only) is the harness floor measured on the training GPUs, used to compare with NeuSight's rows.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from habitat.learned import features as feats
from habitat.learned import safetensors_io
from habitat.learned.devices import DeviceSpec

E_MAX = 2.0
FORMAT = "habitat-efficiency-mlp"
FORMAT_VERSION = 1


def _log_sigmoid(y: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -y)


def soft_max(floor_us: np.ndarray, kernel_us: np.ndarray, sharpness: float) -> np.ndarray:
    """(floor^p + kernel^p)^(1/p): the harness's time when a kernel of `kernel_us` runs behind
    a per-call floor (p = 1: they add; large p: the larger one wins)."""
    p = sharpness
    return np.exp(np.logaddexp(p * np.log(np.maximum(floor_us, 1e-9)), p * np.log(kernel_us)) / p)


def harness_time(floor_us: np.ndarray, kernel_us: np.ndarray, sharpness: float,
                 add_share: np.ndarray | float = 0.0) -> np.ndarray:
    """A harness's time for a kernel behind a per-call floor whose share `add_share` is spent
    before the kernel starts (it adds) and the rest while it runs (merged by soft_max)."""
    share = np.asarray(add_share, dtype=np.float64)
    return share * floor_us + soft_max((1.0 - share) * floor_us, kernel_us, sharpness)


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
        return self.predict_from_features(x, t_roof)

    def harness_floor_us(self, ops: np.ndarray) -> np.ndarray:
        """NeuSight's per-call harness floor for each row's op, as measured on the training
        GPUs (their median): a property of that measurement set-up, not of a GPU."""
        floors = self.metadata.get("harness_floor_us", {}).get("median", {})
        fallback = float(np.median(list(floors.values()))) if floors else 0.0
        return np.array([float(floors.get(str(op), fallback)) for op in ops])

    def predict_harness(self, shapes: dict[str, np.ndarray], dev: DeviceSpec, ops: np.ndarray,
                        precision: str = "fp32") -> np.ndarray:
        """What NeuSight's harness would measure: the kernel time merged with its floor."""
        x, t_roof = feats.compute(self.family, shapes, dev, precision)
        sharpness = float(self.metadata.get("harness_floor_us", {}).get("sharpness", 4.0))
        return soft_max(self.harness_floor_us(ops), self.kernel_from_features(x, t_roof), sharpness)

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
    def load(cls, directory: str | Path, family: str, stem: str | None = None) -> "EfficiencyMLP":
        """`stem`: the file name without suffix when it is not the family's (gemm_fp32)."""
        directory = Path(directory)
        stem = stem or family
        tensors, _ = safetensors_io.load(directory / f"{stem}.safetensors")
        metadata = json.loads((directory / f"{stem}.json").read_text())
        layers = metadata["layers"]
        return cls(family, tensors["norm.mean"], tensors["norm.std"],
                   [tensors[f"layers.{i}.weight"] for i in range(layers)],
                   [tensors[f"layers.{i}.bias"] for i in range(layers)], metadata)


class Fp32Routed:
    """A family's main (precision-aware) model with its FP32 SIMT model beside it, served as the
    engine serves them (csrc/src/learned/learned_model.cpp, LearnedModels::predict_family_us):
    rows in fp32 (TF32 off) whose roofline is at least the FP32 model's from_roofline_us go to
    the FP32 model, every other row to the main one. Below that roofline the FP32 model's
    output is mostly NeuSight's per-call harness floor, which it learned (weights/README.md)."""

    def __init__(self, main: EfficiencyMLP, fp32: EfficiencyMLP):
        self.main, self.fp32 = main, fp32
        self.family = main.family
        self.metadata = main.metadata

    @property
    def launch_floor_us(self) -> float:
        return self.main.launch_floor_us

    def _fp32_rows(self, t_roof: np.ndarray, precision: str | np.ndarray) -> np.ndarray:
        prec = feats._row_precisions(precision, len(t_roof))
        return (prec == "fp32") & (t_roof >= float(self.fp32.metadata.get("from_roofline_us", 0.0)))

    def predict(self, shapes: dict[str, np.ndarray], dev: DeviceSpec, precision: str = "fp32") -> np.ndarray:
        x, t_roof = feats.compute(self.family, shapes, dev, precision)
        out = self.main.predict_from_features(x, t_roof)
        use = self._fp32_rows(t_roof, precision)
        if use.any():
            out[use] = self.fp32.predict_from_features(x[use], t_roof[use])
        return out

    def predict_harness(self, shapes: dict[str, np.ndarray], dev: DeviceSpec, ops: np.ndarray,
                        precision: str = "fp32") -> np.ndarray:
        out = self.main.predict_harness(shapes, dev, ops, precision)
        _, t_roof = feats.compute(self.family, shapes, dev, precision)
        use = self._fp32_rows(t_roof, precision)
        if use.any():
            sub = {c: np.asarray(v)[use] for c, v in shapes.items()}
            prec = feats._row_precisions(precision, len(t_roof))[use]
            out[use] = self.fp32.predict_harness(sub, dev, np.asarray(ops)[use], prec)
        return out


def load_all(directory: str | Path) -> dict[str, EfficiencyMLP | Fp32Routed]:
    """Each family's model as the engine serves it: with its `<family>_fp32` model routed in
    (Fp32Routed) when the directory holds one."""
    directory = Path(directory)
    out: dict[str, EfficiencyMLP | Fp32Routed] = {}
    for f in feats.FAMILIES:
        if not (directory / f"{f}.safetensors").is_file():
            continue
        main = EfficiencyMLP.load(directory, f)
        fp32 = directory / f"{f}_fp32.safetensors"
        out[f] = Fp32Routed(main, EfficiencyMLP.load(directory, f, f"{f}_fp32")) if fp32.is_file() else main
    return out
