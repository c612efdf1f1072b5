"""Trains the efficiency MLPs on NeuSight-format kernel data and writes weights/.

    python -m habitat.learned.train --data ../shared/data/neusight --out weights/

(elementwise, softmax and layernorm with the recorded Hopper traces' kernels added:
habitat.learned.train_traces.)

Only kernels/ is read: test/ is for evaluation. Deterministic for a given seed and
thread count (fixed seeds, deterministic algorithms, sorted inputs).

NeuSight timed each op call alone, so each row is max-like of a per-call harness floor
(25-60 us, per GPU and op: host overhead, not GPU time) and the kernel's time. The models
learn the floor-free kernel time: the loss compares (floor^p + kernel^p)^(1/p) with the
measurement, with the floor measured per (GPU, op) on the training GPUs (harness_floors), so
rows at the floor only bound the kernel from above. The engine puts a real launch floor
(LAUNCH_FLOOR_US) under the kernel time instead.

How long to train is chosen from GPUs held out of each model's own training GPUs
(habitat.learned.fitting.GpuFolds), so a leave-one-GPU-out model never sees its GPU, not even
to pick its step count.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from habitat.learned import features as feats
from habitat.learned.devices import DeviceTable, default_table

# The fitting core lives in habitat.learned.fitting; its names are re-exported here (tests, notebooks).
from habitat.learned.fitting import (  # noqa: F401 (re-exported)
    FLOOR_QUANTILE,
    LAUNCH_FLOOR_US,
    MONOTONE_WEIGHT,
    QUICK,
    GpuFolds,
    TrainConfig,
    _clamp_inputs,
    _fold_floors,
    _harness_metadata,
    _harness_prediction,
    _log,
    _pack_ensemble,
    _split,
    ape,
    design,
    fit,
    gpu_dir_name,
    harness_floors,
    row_floors,
    split_by_shape,
    summary,
)
from habitat.learned.model import EfficiencyMLP
from habitat.learned.neusight import OP_FAMILY, KernelArrays, load_kernels


def train_family(rows: KernelArrays, devices: DeviceTable, cfg: TrainConfig,
                 logo_dir: Path | None = None, holdout: float = 0.0, log=_log) -> EfficiencyMLP:
    """Trains the shipped model on every row, after the leave-one-GPU-out models when logo_dir
    is given (saved under logo_dir/<GPU>/ for habitat.evaluate) and, when holdout > 0, a model
    without that fraction of the shapes. Each model's step count comes from GPUs held out of
    its own training set (GpuFolds). Errors are against NeuSight's measured rows, so the
    predictions include the harness floor of the GPUs the model was trained on."""
    x, t_roof = design(rows, devices)
    t = rows.latency_us
    floors = harness_floors(rows, t_roof)
    floor_us = row_floors(rows, floors)
    keys = rows.shape_keys()
    gpus = sorted(np.unique(rows.device).tolist())
    config = cfg.metadata()
    folds = GpuFolds(rows, x, t_roof, cfg, lambda train: _fold_floors(rows, floors, train))
    t0 = time.time()

    def fit_on(mask: np.ndarray, on_gpus: list[str], step: int, selection: dict) -> EfficiencyMLP:
        m = fit(rows.family, x[mask], t_roof[mask], t[mask], cfg, floor_us[mask], keys[mask], stop_at=step)
        m.metadata["harness_floor_us"] = _harness_metadata(floors, on_gpus, cfg.floor_sharpness)
        m.metadata["training_config"] = config
        m.metadata["step_selection"] = selection
        return m

    step_all, selection_all = folds.best_step(gpus)
    val_err = {}
    if holdout > 0:
        val = split_by_shape(rows, holdout, cfg.seed + 1)
        held = fit_on(~val, gpus, step_all, selection_all)
        pred = _harness_prediction(held, x[val], t_roof[val], rows.op[val])
        val_err = {g: summary(ape(pred, t[val])[rows.device[val] == g]) for g in gpus}
    logo_err = {}
    if logo_dir is not None:
        for g in gpus:
            mask = rows.device == g
            others = [o for o in gpus if o != g]
            step, selection = folds.best_step(others)
            m = fit_on(~mask, others, step, selection)
            logo_err[g] = summary(ape(_harness_prediction(m, x[mask], t_roof[mask], rows.op[mask]), t[mask]))
            m.metadata["training_data"] = {"gpus": others, "held_out_gpu": g}
            target = Path(logo_dir) / gpu_dir_name(g)
            target.mkdir(parents=True, exist_ok=True)
            m.save(target)
            log(f"  {rows.family} without {g}: {step} steps, {logo_err[g]['mean']:.1f}% on it "
                f"({time.time() - t0:.0f}s)")
    model = fit_on(np.ones(len(rows), dtype=bool), gpus, step_all, selection_all)
    pred = _harness_prediction(model, x, t_roof, rows.op)
    train_err = {g: summary(ape(pred, t)[rows.device == g]) for g in gpus}
    model.metadata.update({
        "training_data": {"source": "NeuSight kernels/ (sitar-lab/NeuSight, MIT), FP32, PyTorch 2.1, CUDA 12.1",
                          "ops": sorted(np.unique(rows.op).tolist()), "gpus": gpus, "rows": int(len(rows))},
        "validation_error_pct": {f"held_out_shapes_{holdout:.0%}": val_err, "leave_one_gpu_out": logo_err,
                                 "training_rows": train_err},
        "training_seconds": round(time.time() - t0, 1),
    })
    log(f"{rows.family}: {len(rows)} rows, {step_all} steps, {time.time() - t0:.0f}s; training rows mean APE "
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
    p.add_argument("--holdout", type=float, default=0.0,
                   help="fraction of shapes held out for an extra validation fit (0: skip it)")
    p.add_argument("--precision-data", default=None,
                   help="collect_kernels.py output of one GPU (<op>_<precision>.csv): gemm and conv then train "
                        "on it plus NeuSight's rows (habitat.learned.train_precision)")
    p.add_argument("--precision-timing", choices=("call", "kernel"), default="call",
                   help="what a --precision-data row's time is: 'call' (Latency: CUDA events around one call, "
                        "a harness floor included) or 'kernel' (Kernel Latency less Transform Latency: CUPTI "
                        "device time, collections of 2026-11-23 on)")
    args = p.parse_args(argv)
    cfg = QUICK if args.quick else TrainConfig()
    cfg = TrainConfig(**{**cfg.__dict__, "seed": args.seed, "steps": args.steps or cfg.steps})
    devices = DeviceTable.load(args.devices) if args.devices else default_table()
    families = [f for f in args.families.split(",") if f]
    data = load_kernels(args.data, "kernels", {op for op, f in OP_FAMILY.items() if f in families})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m habitat.learned.train " + " ".join(argv if argv is not None else sys.argv[1:])
    measured = {}
    if args.precision_data:
        from habitat.learned.neusight import load_attention, load_precision_kernels
        measured = load_precision_kernels(args.precision_data, timing=args.precision_timing)
        attention = load_attention(args.precision_data, args.precision_timing)
        if attention is not None:
            measured["attention"] = attention
    for family in families:
        logo = None if args.no_logo else out / "logo"
        if family in measured and family in ("gemm", "conv", "attention"):
            from habitat.learned.train_precision import CLAMPED_FAMILIES, MATRIX_CONFIG, train_matrix_family
            mcfg = TrainConfig(**{**MATRIX_CONFIG.__dict__, "seed": args.seed,
                                  "steps": args.steps or MATRIX_CONFIG.steps,
                                  "clamp_inputs": family in CLAMPED_FAMILIES})
            model = train_matrix_family(data.get(family), measured[family], devices, mcfg, logo,
                                        device_time=args.precision_timing == "kernel")
            model.metadata["training_command"] = command
            model.save(out)
            continue
        if family not in data:
            print(f"{family}: no rows in {args.data}/kernels, skipped")
            continue
        fcfg = TrainConfig(**{**cfg.__dict__, "features": feats.neusight_features(family)})
        model = train_family(data[family], devices, fcfg, logo, args.holdout)
        model.metadata["training_command"] = command
        model.save(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
