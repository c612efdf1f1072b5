"""Trains the efficiency MLPs on NeuSight-format kernel data and writes weights/.

    python -m habitat.learned.train --data ../shared/data/neusight --out weights/

Only kernels/ is read: test/ is for evaluation. Deterministic for a given seed and
thread count (fixed seeds, deterministic algorithms, sorted inputs).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from habitat.learned import features as feats
from habitat.learned.devices import DeviceTable, default_table
from habitat.learned.model import E_MAX, FORMAT, FORMAT_VERSION, EfficiencyMLP
from habitat.learned.neusight import OP_FAMILY, KernelArrays, load_kernels


@dataclass(frozen=True)
class TrainConfig:
    hidden: tuple[int, ...] = (64, 64)
    steps: int = 400
    batch: int = 256
    lr: float = 5e-3
    weight_decay: float = 1e-5
    seed: int = 0
    max_rows: int = 30000  # per model; larger sets are subsampled (deterministically)
    threads: int = 1  # tiny layers: more threads only add contention


QUICK = TrainConfig(steps=100, max_rows=4000)


def design(rows: KernelArrays, devices: DeviceTable, precision: str = "fp32") -> tuple[np.ndarray, np.ndarray]:
    """Features and roofline times for every row, grouped by device."""
    x = np.zeros((len(rows), len(feats.FEATURE_NAMES[rows.family])))
    t_roof = np.zeros(len(rows))
    for name in np.unique(rows.device):
        idx = np.nonzero(rows.device == name)[0]
        sub = rows.take(idx)
        x[idx], t_roof[idx] = feats.compute(rows.family, sub.shapes, devices.find(name), precision)
    return x, t_roof


def fit(family: str, x: np.ndarray, t_roof: np.ndarray, t_meas: np.ndarray,
        cfg: TrainConfig = TrainConfig()) -> EfficiencyMLP:
    """Fits log(time) = log(t_roof) - log(E_MAX * sigmoid(mlp(x))) with an L1 loss."""
    import torch

    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(cfg.seed)
    if len(x) > cfg.max_rows:
        keep = np.sort(rng.choice(len(x), cfg.max_rows, replace=False))
        x, t_roof, t_meas = x[keep], t_roof[keep], t_meas[keep]
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std[std < 1e-6] = 1.0
    xs = torch.tensor(((x - mean) / std), dtype=torch.float32)
    # target: log efficiency the net must produce = log(t_roof / t_meas)
    target = torch.tensor(np.log(t_roof) - np.log(t_meas), dtype=torch.float32)
    layers: list[torch.nn.Module] = []
    width = x.shape[1]
    for h in cfg.hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, 1))
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(cfg.seed)
    log_emax = float(np.log(E_MAX))
    for _ in range(cfg.steps):
        idx = torch.randint(0, len(xs), (min(cfg.batch, len(xs)),), generator=gen)
        log_eff = log_emax + torch.nn.functional.logsigmoid(net(xs[idx])[:, 0])
        loss = (log_eff - target[idx]).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    return EfficiencyMLP(
        family, mean.astype(np.float32), std.astype(np.float32),
        [m.weight.detach().numpy().astype(np.float32).copy() for m in linears],
        [m.bias.detach().numpy().astype(np.float32).copy() for m in linears],
        {"format": FORMAT, "version": FORMAT_VERSION, "family": family, "layers": len(linears),
         "hidden": list(cfg.hidden), "activation": "relu", "e_max": E_MAX,
         "features": list(feats.FEATURE_NAMES[family]),
         "shape_columns": list(feats.SHAPE_COLUMNS[family]),
         "normalisation": "x' = (x - norm.mean) / norm.std (tensors in the .safetensors file)",
         "output": "time_us = roofline_us / (e_max * sigmoid(y))"},
    )


def ape(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(pred - meas) / meas * 100.0


def summary(errors: np.ndarray) -> dict[str, float]:
    if len(errors) == 0:
        return {"n": 0}
    return {"n": int(len(errors)), "mean": float(np.mean(errors)), "median": float(np.median(errors)),
            "p90": float(np.percentile(errors, 90))}


def split_by_shape(rows: KernelArrays, fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of validation rows: a fraction of the distinct shapes, on every GPU."""
    keys = rows.shape_keys()
    unique = np.unique(keys)
    rng = np.random.default_rng(seed)
    chosen = set(rng.choice(unique, max(1, int(len(unique) * fraction)), replace=False).tolist())
    return np.array([k in chosen for k in keys])


def gpu_dir_name(gpu: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", gpu)


def _log(text: str) -> None:
    print(text, flush=True)


def train_family(rows: KernelArrays, devices: DeviceTable, cfg: TrainConfig,
                 logo_dir: Path | None = None, holdout: float = 0.1, log=_log) -> EfficiencyMLP:
    """Trains the shipped model on every row, after measuring held-out-shape error (10% of
    shapes) and, when logo_dir is given, leave-one-GPU-out error; the leave-one-GPU-out
    models are saved under logo_dir/<GPU>/ for habitat.evaluate."""
    x, t_roof = design(rows, devices)
    t = rows.latency_us
    gpus = sorted(np.unique(rows.device).tolist())
    t0 = time.time()
    val_err = {}
    if holdout > 0:
        val = split_by_shape(rows, holdout, cfg.seed)
        held = fit(rows.family, x[~val], t_roof[~val], t[~val], cfg)
        pred = held.predict_from_features(x[val], t_roof[val])
        val_err = {g: summary(ape(pred, t[val])[rows.device[val] == g]) for g in gpus}
    logo_err = {}
    if logo_dir is not None:
        for g in gpus:
            mask = rows.device == g
            m = fit(rows.family, x[~mask], t_roof[~mask], t[~mask], cfg)
            logo_err[g] = summary(ape(m.predict_from_features(x[mask], t_roof[mask]), t[mask]))
            m.metadata["training_data"] = {"gpus": [x for x in gpus if x != g], "held_out_gpu": g}
            m.metadata["training_config"] = {k: (list(v) if isinstance(v, tuple) else v)
                                             for k, v in cfg.__dict__.items()}
            target = Path(logo_dir) / gpu_dir_name(g)
            target.mkdir(parents=True, exist_ok=True)
            m.save(target)
    model = fit(rows.family, x, t_roof, t, cfg)
    train_err = {g: summary(ape(model.predict_from_features(x, t_roof), t)[rows.device == g]) for g in gpus}
    model.metadata.update({
        "training_data": {"source": "NeuSight kernels/ (sitar-lab/NeuSight, MIT), FP32, PyTorch 2.1, CUDA 12.1",
                          "ops": sorted(np.unique(rows.op).tolist()), "gpus": gpus, "rows": int(len(rows))},
        "training_config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.__dict__.items()},
        "validation_error_pct": {f"held_out_shapes_{holdout:.0%}": val_err, "leave_one_gpu_out": logo_err,
                                 "training_rows": train_err},
    })
    log(f"{rows.family}: {len(rows)} rows, {time.time() - t0:.0f}s; training rows mean APE "
        + ", ".join(f"{g} {e['mean']:.1f}%" for g, e in train_err.items())
        + ("; held-out shapes " + ", ".join(f"{g} {e['mean']:.1f}%" for g, e in val_err.items()) if val_err else "")
        + ("; leave-one-GPU-out " + ", ".join(f"{g} {e['mean']:.1f}%" for g, e in logo_err.items()) if logo_err else ""))
    return model


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m habitat.learned.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="NeuSight data directory (reads its kernels/ only)")
    p.add_argument("--out", required=True, help="directory for <family>.safetensors and <family>.json")
    p.add_argument("--families", default=",".join(feats.FAMILIES))
    p.add_argument("--devices", default=None, help="devices.json (default: the package's)")
    p.add_argument("--quick", action="store_true", help="few steps on a subsample (smoke test)")
    p.add_argument("--no-logo", action="store_true", help="skip the leave-one-GPU-out runs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=None, help="optimiser steps per model")
    p.add_argument("--holdout", type=float, default=0.1,
                   help="fraction of shapes held out for an extra validation fit (0: skip it)")
    args = p.parse_args(argv)
    cfg = QUICK if args.quick else TrainConfig()
    cfg = TrainConfig(**{**cfg.__dict__, "seed": args.seed, "steps": args.steps or cfg.steps})
    devices = DeviceTable.load(args.devices) if args.devices else default_table()
    families = [f for f in args.families.split(",") if f]
    data = load_kernels(args.data, "kernels", {op for op, f in OP_FAMILY.items() if f in families})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m habitat.learned.train " + " ".join(argv if argv is not None else sys.argv[1:])
    for family in families:
        if family not in data:
            print(f"{family}: no rows in {args.data}/kernels, skipped")
            continue
        model = train_family(data[family], devices, cfg, None if args.no_logo else out / "logo", args.holdout)
        model.metadata["training_command"] = command
        model.save(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
