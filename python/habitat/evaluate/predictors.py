"""The predictors compared: our learned models, the plain roofline and Habitat's formulas."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from habitat import _engine
from habitat.data.engine import weights_dir
from habitat.learned import features as feats
from habitat.learned.devices import DEFAULT_DB, DeviceSpec
from habitat.learned.model import EfficiencyMLP, load_all
from habitat.learned.train import gpu_dir_name

# Published anchors (NeuSight, ASPLOS'25, FP32, GPUs unseen in training): mean abs % error.
ANCHORS_KERNEL = {"bmm": 13.8, "linear": 13.9, "elementwise": 19.3, "softmax": 13.9, "ln": 56.7}
ANCHORS_E2E = {"train": 7.3, "inf": 9.7}


def default_weights_dir() -> Path:
    """The forecasts' weights directory (habitat.data.engine.weights_dir: HABITAT_WEIGHTS, else
    the packaged or source-tree weights/), which must hold trained models to evaluate."""
    found = weights_dir()
    if found and any(Path(found).glob("*.safetensors")):
        return Path(found)
    raise FileNotFoundError(f"no trained weights in {found or '(HABITAT_WEIGHTS is empty)'}: run "
                            "python -m habitat.learned.train --data DIR --out weights/")


class ModelSet:
    """The shipped models plus the leave-one-GPU-out ones: for a target GPU, use a model that
    never saw it (its leave-one-out model when it was a training GPU, else the shipped one)."""

    def __init__(self, weights_dir: Path):
        self.shipped = load_all(weights_dir)
        self.logo: dict[str, dict[str, EfficiencyMLP]] = {}
        logo_root = weights_dir / "logo"
        if logo_root.is_dir():
            for d in sorted(logo_root.iterdir()):
                if d.is_dir():
                    self.logo[d.name] = load_all(d)

    def for_target(self, family: str, target_gpu: str) -> tuple[EfficiencyMLP | None, str]:
        logo = self.logo.get(gpu_dir_name(target_gpu), {})
        if family in logo:
            return logo[family], "leave-one-GPU-out"
        model = self.shipped.get(family)
        if model is None:
            return None, "none"
        if target_gpu in model.metadata.get("training_data", {}).get("gpus", []):
            return model, "seen"  # no leave-one-out model: flagged, not unseen
        return model, "unseen"


def work(family: str, shapes: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of each row, as the features count them (device-independent)."""
    return feats.work(family, shapes)


def roofline_us(family: str, shapes: dict[str, np.ndarray], dev: DeviceSpec, precision: str = "fp32") -> np.ndarray:
    return feats.compute(family, shapes, dev, precision)[1]


def habitat_wave_scaling(t_origin: np.ndarray, flops: np.ndarray, nbytes: np.ndarray, blocks: np.ndarray | None,
                         o: DeviceSpec, t: DeviceSpec, precision: str = "fp32",
                         threads: np.ndarray | None = None, devices_json: str | Path = DEFAULT_DB) -> np.ndarray:
    """Habitat (ATC'21) wave scaling, as the engine computes it (csrc/src/predict/wave_scaling.cpp),
    with the arithmetic intensity from the op's FLOPs and bytes (their counters' stand-in) and,
    when known, the origin kernel's block count and threads per block. Under one wave means
    fewer blocks than the SMs x resident blocks per SM of both GPUs (the occupancy calculator,
    registers and shared memory taken as not limiting)."""
    def floats(a):
        return np.broadcast_to(np.asarray(a, dtype=np.float64), np.shape(t_origin)).tolist()

    out = _engine.wave_scale_us(
        floats(t_origin), floats(flops), floats(nbytes), o.name, t.name,
        blocks=None if blocks is None else floats(blocks),
        threads_per_block=None if threads is None else np.asarray(threads, dtype=np.int64).tolist(),
        precision=precision, devices_json=str(devices_json))
    return np.asarray(out, dtype=np.float64)


def bandwidth_ratio(t_origin: np.ndarray, o: DeviceSpec, t: DeviceSpec) -> np.ndarray:
    """Habitat's fallback without counters: scale by the memory bandwidth ratio."""
    return t_origin * o.bandwidth_gbs / t.bandwidth_gbs


def errors(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(pred - meas) / meas * 100.0


def stats(err: np.ndarray) -> dict[str, float]:
    if len(err) == 0:
        return {"n": 0}
    return {"n": int(len(err)), "mean": round(float(np.mean(err)), 2),
            "median": round(float(np.median(err)), 2), "p90": round(float(np.percentile(err, 90)), 2)}
