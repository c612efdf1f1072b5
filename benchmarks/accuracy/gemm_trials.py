"""GEMM feature trials: retrains the GEMM model with a changed feature set and evaluates it
with the same protocol as the shipped weights (leave-one-GPU-out on kernels/, test/).

    python benchmarks/accuracy/gemm_trials.py train --variant power+lanes --seed 0 --out /tmp/w
    python benchmarks/accuracy/gemm_trials.py levels --weights weights

`train` patches habitat.learned.features for this process only (the engine and the shipped
weights are untouched), trains `gemm` with python -m habitat.learned.train's code and prints
python -m habitat.evaluate kernels --groups bmm,linear for the result. `levels` splits each
GPU's shape-based error into its level (the median log error of that GPU's rows) and the rest:
the error left if each GPU's level were known.

Results and what they mean: benchmarks/accuracy/README.md ("Tried").
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from pathlib import Path

import numpy as np

from habitat.learned import features as feats
from habitat.learned import train
from habitat.learned.devices import DeviceSpec, _key, default_table

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "neusight"

# Device figures the shipped features leave out on purpose (see features.DEVICE_FEATURES).
EXTRA = {
    # Power per unit of FP32 compute: T4 and L4 (70-72 W) sustain far below boost on dense work.
    "log2_watts_per_tflop": lambda d, tdp: np.log2(tdp / (d.peak_flops("fp32") / 1e12)),
    # FP32 lanes per SM over 64: 2 for GP104 (P4) and AD104 (L4), 1 for the others.
    "fp32_lanes_per_sm": lambda d, tdp: d.peak_flops("fp32") / (d.sms * d.clock_mhz * 1e6 * 2.0) / 64.0,
}
VARIANTS = {
    "shipped-features": ((), ()),
    "power": (("log2_watts_per_tflop",), ()),
    "power+lanes": (("log2_watts_per_tflop", "fp32_lanes_per_sm"), ()),
    "no-batch": ((), ("log2_b",)),
    "no-batch+power": (("log2_watts_per_tflop",), ("log2_b",)),
    "no-dims": ((), ("log2_b", "log2_m", "log2_n")),
}


@functools.cache
def _tdp_by_key() -> dict[str, float]:
    doc = json.loads((REPO / "python" / "habitat" / "data" / "devices.json").read_text())
    return {_key(e["name"]): float(e["tdp_w"]) for e in doc["devices"]}


def _tdp(dev: DeviceSpec) -> float:
    """The board power of `dev` (DeviceSpec leaves it out: the shipped features do not use it)."""
    for name in (dev.name, *dev.aliases):
        if _key(name) in _tdp_by_key():
            return _tdp_by_key()[_key(name)]
    raise KeyError(f"no tdp_w for {dev.name}")


def patch_features(extra: tuple[str, ...], dropped: tuple[str, ...]) -> None:
    """GEMM rows get `extra` device columns appended and `dropped` columns removed."""
    compute, names = feats.compute, feats.FEATURE_NAMES["gemm"]
    keep = [i for i, n in enumerate(names) if n not in dropped]

    def patched(family, shapes, dev, precision="fp32"):
        if family != "gemm":
            return compute(family, shapes, dev, precision)
        feats.FEATURE_NAMES["gemm"] = names
        try:
            x, t_roof = compute(family, shapes, dev, precision)
        finally:
            feats.FEATURE_NAMES["gemm"] = new_names
        cols = [x[:, keep]] + [np.full((len(x), 1), EXTRA[e](dev, _tdp(dev))) for e in extra]
        return np.concatenate(cols, axis=1), t_roof

    new_names = tuple(names[i] for i in keep) + extra
    feats.FEATURE_NAMES["gemm"] = new_names
    feats.compute = patched


def run_train(args: argparse.Namespace) -> None:
    from habitat.evaluate import __main__ as evaluate
    patch_features(*VARIANTS[args.variant])
    nets = args.members  # a class body cannot read an enclosing local it also assigns

    @dataclasses.dataclass(frozen=True)
    class Config(train.TrainConfig):
        members: int = nets
    train.TrainConfig = Config
    train.main(["--data", str(args.data), "--out", str(args.out), "--families", "gemm", "--seed", str(args.seed)])
    evaluate.main(["kernels", "--data", str(args.data), "--weights", str(args.out), "--groups", "bmm,linear",
                   "--json", str(Path(args.out) / "kernels.json")])


def run_levels(args: argparse.Namespace) -> None:
    from habitat.evaluate.predictors import ModelSet
    from habitat.learned.neusight import load_kernels
    models, devices = ModelSet(Path(args.weights)), default_table()
    print(f"{'layout':8s}{'op':8s}{'GPU':26s}{'n':>6s} {'level':>6s} {'mean %':>7s} {'level known':>12s}")
    for layout in ("kernels", "test"):
        rows = load_kernels(args.data, layout, {"bmm", "linear"})["gemm"]
        for gpu in sorted(set(rows.device)):
            model, _ = models.for_target("gemm", gpu)
            for op in ("bmm", "linear"):
                sub = rows.take(np.nonzero((rows.device == gpu) & (rows.op == op))[0])
                pred = model.predict_harness(sub.shapes, devices.find(gpu), sub.op)
                level = float(np.median(np.log(pred / sub.latency_us)))
                err = np.abs(pred - sub.latency_us) / sub.latency_us * 100.0
                fixed = np.abs(pred * np.exp(-level) - sub.latency_us) / sub.latency_us * 100.0
                print(f"{layout:8s}{op:8s}{gpu:26s}{len(sub):6d} {level:+6.2f} {err.mean():7.1f} {fixed.mean():12.1f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("train")
    t.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--members", type=int, default=1)
    t.add_argument("--out", required=True)
    t.add_argument("--data", default=str(DATA))
    lv = sub.add_parser("levels")
    lv.add_argument("--weights", default=str(REPO / "weights"))
    lv.add_argument("--data", default=str(DATA))
    args = p.parse_args(argv)
    (run_train if args.what == "train" else run_levels)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
