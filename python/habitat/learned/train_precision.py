"""Trains the GEMM and convolution models on NeuSight's FP32 rows plus measured kernels in
several precisions (benchmarks/gpu/collect_kernels.py: fp32, tf32, bf16, fp16; conv forward,
data gradient and weight gradient), and measures them on shapes they never saw.

    python -m habitat.learned.train --data NEUSIGHT_DATA \\
        --precision-data benchmarks/results/kernels/H100-SXM5-80GB --out weights --families gemm,conv

Splits (all deterministic; recorded in each model's metadata):
- test: `TEST_FRACTION` of the measured GPU's problems (op and dimensions, every precision and
  convolution pass of a problem together), chosen with `numpy.random.default_rng(split_seed)`;
  never trained on, never used to stop training. Its error is the leave-shapes-out figure.
- validation: `cfg.val_fraction` of the remaining problems of every source, for early stopping
  (the loss is the mean over sources, so the small measured set counts as much as NeuSight's).
- leave-one-GPU-out: for each NeuSight GPU, a model trained without that GPU's rows (the
  measured GPU's training rows included), saved under logo/<GPU>/ for habitat.evaluate.

Both data sets carry a per-call harness floor (NeuSight 25-60 us; the H100 collection 22-38 us,
CUDA events around one op call): the loss models it per (op, GPU) as the main trainer does, so
the models learn the floor-free kernel time.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from habitat.learned import conv_layout
from habitat.learned.devices import DeviceTable
from habitat.learned.fitting import (
    DEVICE_TIME_FLOOR_US,
    LAUNCH_FLOOR_US,
    MONOTONE_WEIGHT,
    TrainConfig,
    _fold_floors,
    _harness_metadata,
    _log,
    ape,
    design,
    fit,
    floor_keys,
    gpu_dir_name,
    harness_floors,
    row_floors,
    source_weights,
    summary,
)
from habitat.learned.model import EfficiencyMLP, harness_time, soft_max
from habitat.learned.neusight import KernelArrays

TEST_FRACTION = 0.2
SPLIT_SEED = 0
# Share of each batch drawn from the measured multi-precision rows (the rest from NeuSight's).
MEASURED_SHARE = 0.5
# No input clamp: NeuSight's test/ GEMMs reach 65536 x 50272 x 4096, far beyond kernels/; clamped
# to the training range each feature saturates on its own and the combination lands at 10 % of
# peak (test/ linear 70 % mean error on the A100 80GB), while the ReLU net's linear
# extrapolation of the large-GEMM trend stays near the measurements (5 %).
# conv keeps the clamp and trains without the size-monotonicity penalty: with either change its
# held-out error rose (H100 bf16 24 -> 26 %, fp32 34 -> 36-37 %, leave-one-GPU-out A100 80GB
# 32 -> 43-44 %), and NeuSight has no out-of-range conv test set.
MATRIX_CONFIG = TrainConfig(hidden=(64, 64), steps=4000, batch=1024, lr=2e-3, weight_decay=1e-4,
                            max_rows=400000, eval_every=100, clamp_inputs=False)
# The measured collection times one op call between two CUDA events with the GPU idle
# (collect_kernels.py time_case): the start event fires at once, the host then spends its
# per-call overhead (dispatch, cuBLAS/cuDNN setup, launches) before the kernel starts, so most
# of that overhead adds to the kernel (p = 1), while NeuSight's rows keep the soft maximum
# (p = 4) the main trainer fits to them. Which form the measured rows take was chosen per
# family by the least validation loss on the measured validation problems (never the test
# shapes), p = 1 against p = 4 (and 2): conv 0.280 against 0.289 (0.298), gemm 0.225 against
# 0.218 (0.220), attention 0.068 against 0.066; families not listed keep cfg.floor_sharpness.
# With p = 1 the measured floor is the overhead alone: the smallest rows' median time less the
# one kernel they ran (LAUNCH_FLOOR_US).
MEASURED_SHARPNESS: dict[str, float] = {"conv": 1.0}
# Families whose measured GPUs' harness floors (one per op, precision and GPU: fitting.floor_key)
# are fitted with the net instead of fixed at the smallest rows' median (see _floor_groups).
FITTED_FLOOR_FAMILIES: tuple[str, ...] = ("gemm", "conv")
# Families whose fitted floors are also split into a part that adds to the kernel and a part
# that overlaps it (fit's split_floor; harness_floor_us.measured_add_share in the metadata).
SPLIT_FLOOR_FAMILIES: tuple[str, ...] = ("gemm",)
CLAMPED_FAMILIES = ("conv",)
# Families trained on their measured rows less cuDNN's NCHW <-> NHWC layout transforms (the
# collection ran NCHW tensors; habitat.learned.conv_layout), which the engine adds back per op.
LAYOUT_FAMILIES = ("conv",)
MONOTONE_FAMILIES = ("gemm", "attention")


TRANSFER_LIMITS = (
    "Tensor-core precisions (tf32, bf16, fp16) and fused attention are measured on one GPU only (the H100 "
    "of the training data). A forecast in those precisions for any other GPU (A100, L4, ...) rests on the "
    "efficiency the H100 reaches at the same op-relative point (time over the target's own roofline for "
    "that precision, waves over its SMs, bytes over its L2) and on the target's datasheet peak; whether "
    "another GPU gets as close to its peak is not in the data and cannot be validated without measured "
    "kernels from it (benchmarks/gpu/collect_kernels.py). fp8 is forecast as 16-bit work on the fp8 "
    "roofline (no fp8 data). FP32 rests on six GPUs (NeuSight's five and the H100).")


def leave_shapes_out(rows: KernelArrays, fraction: float = TEST_FRACTION, seed: int = SPLIT_SEED) -> np.ndarray:
    """Test mask: `fraction` of the distinct problems (problem_keys), in every precision and pass."""
    keys = rows.problem_keys()
    unique = np.unique(keys)
    chosen = np.random.default_rng(seed).choice(unique, int(round(len(unique) * fraction)), replace=False)
    return np.isin(keys, chosen)


def selection_split(rows: KernelArrays, test: np.ndarray, fraction: float, seed: int = SPLIT_SEED) -> np.ndarray:
    """Model-selection mask: `fraction` of the problems outside `test` (every precision and pass)."""
    if fraction <= 0:
        return np.zeros(len(rows), dtype=bool)
    keys = rows.problem_keys()
    unique = np.unique(keys[~test])
    chosen = np.random.default_rng(seed + 100).choice(unique, int(round(len(unique) * fraction)), replace=False)
    return np.isin(keys, chosen) & ~test


def _validation_labels(rows: KernelArrays, source: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    keys = rows.problem_keys()
    unique = np.unique(keys)
    chosen = np.random.default_rng(seed + 1).choice(unique, max(1, int(len(unique) * fraction)), replace=False)
    return np.where(np.isin(keys, chosen), source, "")


def measured_sharpness(model: EfficiencyMLP) -> float:
    """The harness exponent the model was fitted with on the measured (collect_kernels.py) rows."""
    harness = model.metadata["harness_floor_us"]
    return float(harness.get("measured_sharpness", harness["sharpness"]))


def harness_prediction(model: EfficiencyMLP, rows: KernelArrays, devices: DeviceTable,
                       floors: dict[str, dict[str, float]]) -> np.ndarray:
    """The model's kernel time merged with the harness floor of each row's own (op, GPU), the
    way the measured collection's harness merges them (rows of collect_kernels.py)."""
    x, t_roof = design(rows, devices)
    return harness_time(row_floors(rows, floors), model.kernel_from_features(x, t_roof), measured_sharpness(model),
                        row_add_shares(model, rows))


def row_add_shares(model: EfficiencyMLP, rows: KernelArrays) -> np.ndarray:
    """Each row's share of its floor that adds to the kernel (0 unless the model fitted one)."""
    shares = model.metadata.get("harness_floor_us", {}).get("measured_add_share", {})
    return np.array([shares.get(k, {}).get(g, 0.0) for k, g in zip(floor_keys(rows), rows.device)])


def _measured_sharpness(family: str, cfg: TrainConfig) -> float:
    return MEASURED_SHARPNESS.get(family, cfg.floor_sharpness)


def _row_sharpness(family: str, source: np.ndarray, cfg: TrainConfig) -> np.ndarray:
    return np.where(source == "neusight", cfg.floor_sharpness, _measured_sharpness(family, cfg))


def _additive_floors(floors: dict[str, dict[str, float]], measured_gpus: set[str],
                     sharpness: float) -> dict[str, dict[str, float]]:
    """The measured GPUs' floors as per-call overhead alone (see MEASURED_SHARPNESS)."""
    if sharpness != 1.0:
        return floors
    return {op: {g: (max(v - LAUNCH_FLOOR_US, 1.0) if g in measured_gpus else v) for g, v in per.items()}
            for op, per in floors.items()}


def errors_by_precision(pred: np.ndarray, rows: KernelArrays) -> dict[str, dict[str, dict]]:
    """Error summary per precision and op (conv passes apart), plus 'all' per precision."""
    err = ape(pred, rows.latency_us)
    out: dict[str, dict[str, dict]] = {}
    for p in sorted(set(rows.precision.tolist())):
        sel = rows.precision == p
        out[p] = {"all": summary(err[sel])}
        for op in sorted(set(rows.op[sel].tolist())):
            out[p][op] = summary(err[sel & (rows.op == op)])
    return out


# Dimensions doubled for the size-monotonicity penalty (one per row, drawn with the seed).
GROWN_DIMS = {"gemm": ("b", "m", "n", "k"), "conv": ("batch", "cin", "cout"), "attention": ("batch_heads", "l", "s")}


def grown_rows(rows: KernelArrays, seed: int) -> KernelArrays:
    """Each row's problem with one dimension (GROWN_DIMS) doubled: same op, GPU, precision."""
    dims = GROWN_DIMS[rows.family]
    pick = np.random.default_rng(seed + 2).integers(0, len(dims), len(rows))
    shapes = {c: v.copy() for c, v in rows.shapes.items()}
    for i, d in enumerate(dims):
        shapes[d][pick == i] *= 2.0
    return KernelArrays(rows.family, rows.op, rows.device, rows.latency_us, rows.blocks, shapes,
                        rows.threads, rows.precision)


def monotone_pairs(rows: KernelArrays, devices: DeviceTable, seed: int):
    """Pairs for fit's size-monotonicity penalty: every training problem with one dimension
    doubled, on its own GPU and precision, and again on a GPU and precision of the database
    drawn at random (the penalty needs no measurement, so it reaches GPUs and precisions the
    data do not: fp16 on a T4, tf32 on an A100)."""
    rng = np.random.default_rng(seed + 3)
    names = np.array([d.name for d in devices.devices], dtype=object)
    elsewhere = KernelArrays(rows.family, rows.op, names[rng.integers(0, len(names), len(rows))],
                             rows.latency_us, rows.blocks, {c: v.copy() for c, v in rows.shapes.items()},
                             rows.threads, rows.precision.copy())
    precisions = np.array(["fp32", "tf32", "bf16", "fp16"], dtype=object)
    elsewhere.precision = precisions[rng.integers(0, len(precisions), len(rows))]
    elsewhere.shapes["elem_bytes"] = np.where(np.isin(elsewhere.precision, ["bf16", "fp16"]), 2.0, 4.0)
    if rows.family == "attention":  # flash attention has no tf32 variant
        elsewhere.precision = np.where(elsewhere.precision == "tf32", "fp32", elsewhere.precision)
    a, b = [], []
    for base in (rows, elsewhere):
        a.append(design(base, devices))
        b.append(design(grown_rows(base, seed), devices))
    return (np.concatenate([x for x, _ in a]), np.concatenate([t for _, t in a]),
            np.concatenate([x for x, _ in b]), np.concatenate([t for _, t in b]))


def _floor_groups(rows: KernelArrays, source: np.ndarray, family: str) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Rows whose harness floor is fitted with the net (FITTED_FLOOR_FAMILIES): the measured
    GPUs' rows, one group per (floor key, GPU); -1 elsewhere (NeuSight's floors stay fixed)."""
    groups = np.full(len(rows), -1)
    names: list[tuple[str, str]] = []
    if family not in FITTED_FLOOR_FAMILIES:
        return groups, names
    keys = floor_keys(rows)
    measured = source != "neusight"
    for pair in sorted(set(zip(keys[measured].tolist(), rows.device[measured].tolist()))):
        groups[measured & (keys == pair[0]) & (rows.device == pair[1])] = len(names)
        names.append(pair)
    return groups, names


def _device_time_floors(floors: dict[str, dict[str, float]], measured_gpus: set[str]) -> dict[str, dict[str, float]]:
    """The measured GPUs' floors when their rows are device time (no harness: none)."""
    return {op: {g: (DEVICE_TIME_FLOOR_US if g in measured_gpus else v) for g, v in per.items()}
            for op, per in floors.items()}


def _fit_rows(rows: KernelArrays, source: np.ndarray, devices: DeviceTable, cfg: TrainConfig,
              device_time: bool = False):
    """`device_time`: the measured rows are CUPTI kernel time (load_precision_kernels timing
    "kernel"), so they carry no harness floor to fit."""
    x, t_roof = design(rows, devices)
    measured_gpus = {d for d, src in zip(rows.device, source) if src != "neusight"}
    p_measured = _measured_sharpness(rows.family, cfg)
    if device_time:
        floors = _device_time_floors(harness_floors(rows, t_roof), measured_gpus)
    else:
        floors = _additive_floors(harness_floors(rows, t_roof), measured_gpus, p_measured)
    labels = _validation_labels(rows, source, cfg.val_fraction, cfg.seed)
    monotone = rows.family in MONOTONE_FAMILIES
    groups, group_names = _floor_groups(rows, source, rows.family) if not device_time else (
        np.full(len(rows), -1), [])
    model = fit(rows.family, x, t_roof, rows.latency_us, cfg, row_floors(rows, floors), rows.problem_keys(),
                val_groups=labels, sample_weight=source_weights(source, MEASURED_SHARE),
                pairs=monotone_pairs(rows, devices, cfg.seed) if monotone else None,
                sharpness=_row_sharpness(rows.family, source, cfg), floor_groups=groups,
                split_floor=rows.family in SPLIT_FLOOR_FAMILIES and not device_time)
    shares = model.metadata.pop("floor_add_shares", None)
    if group_names:
        start = {f"{k}|{g}": floors[k][g] for k, g in group_names}
        offsets = model.metadata.pop("floor_log_offsets")
        floors = {k: dict(per) for k, per in floors.items()}
        for (k, g), off in zip(group_names, offsets):
            floors[k][g] = float(floors[k][g] * np.exp(off))
        model.metadata["fitted_floors"] = {
            "note": "the measured GPUs' floors were fitted with the net (fit's floor_groups), starting from the "
                    "smallest rows' estimate (start_us); harness_floor_us.per_gpu holds the fitted ones",
            "start_us": start}
    model.metadata["size_monotonicity"] = "not trained for" if not monotone else {
        "penalty": "weight x relu(log kernel(problem) - log kernel(problem with one dim doubled)), on the "
                   "training problems on their own GPU and precision and on a random database GPU and precision",
        "weight": MONOTONE_WEIGHT, "dims": list(GROWN_DIMS[rows.family])}
    model.metadata["harness_floor_us"] = _harness_metadata(floors, sorted(set(rows.device.tolist())),
                                                           cfg.floor_sharpness)
    model.metadata["harness_floor_us"].update({
        "measured_sharpness": p_measured,
        "measured_note": (f"rows of the measured GPUs are device time (collect_kernels.py 'Kernel Latency' less "
                          f"'Transform Latency'): their floor is {DEVICE_TIME_FLOOR_US} us, i.e. none")
        if device_time else
        "rows of the measured GPUs (collect_kernels.py: one call between CUDA events) are "
        "fitted and evaluated as (floor^p + kernel^p)^(1/p) with p = measured_sharpness; "
        + ("p = 1: the per-call overhead and the kernel add, and the floor is the smallest "
           "rows' median less one launch_floor_us kernel" if p_measured == 1.0 else
           "the floor is the smallest rows' median")})
    if shares is not None:
        per: dict[str, dict[str, float]] = {}
        for (k, g), v in zip(group_names, shares):
            per.setdefault(k, {})[g] = float(v)
        model.metadata["harness_floor_us"]["measured_add_share"] = per
        model.metadata["harness_floor_us"]["measured_note"] += (
            "; measured_add_share: the share s of each fitted floor F spent before the kernel starts, "
            "time = s F + (((1 - s) F)^p + kernel^p)^(1/p) (habitat.learned.model.harness_time)")
    return model, floors


def train_matrix_family(neusight: KernelArrays | None, measured: KernelArrays, devices: DeviceTable,
                        cfg: TrainConfig = MATRIX_CONFIG, logo_dir: Path | None = None,
                        test_fraction: float = TEST_FRACTION, split_seed: int = SPLIT_SEED,
                        log=_log, select_fraction: float = 0.0, device_time: bool = False) -> EfficiencyMLP:
    """`select_fraction` > 0 (model selection, never for shipped weights): that fraction of the
    training problems (not the test ones) is also left out, and the model's error on it is
    recorded as metadata["selection_error_pct"]; choose between candidates by that figure
    (benchmarks/accuracy/floor_trials.py). `device_time`: `measured` was read with timing
    "kernel" (device time, the layout transforms measured out), so there is no harness floor to
    fit and no transform to model away; its held-out errors are against device time."""
    family = measured.family
    t0 = time.time()
    if family in LAYOUT_FAMILIES and not device_time:  # learn the convolution alone: see conv_layout
        measured, _ = conv_layout.without_transforms(measured, devices)
    test = leave_shapes_out(measured, test_fraction, split_seed)
    select = selection_split(measured, test, select_fraction, split_seed)
    parts = ([neusight] if neusight is not None else []) + [measured.take(~test & ~select)]
    rows = KernelArrays.concat(parts)
    source = np.concatenate(([np.full(len(neusight), "neusight", dtype=object)] if neusight is not None else [])
                            + [np.array([f"measured:{d}" for d in measured.device[~test & ~select]], dtype=object)])
    model, floors = _fit_rows(rows, source, devices, cfg, device_time)
    if select.any():
        chosen = measured.take(select)
        model.metadata["selection_error_pct"] = errors_by_precision(
            harness_prediction(model, chosen, devices, floors), chosen)
        log(f"{family}: selection problems: " + ", ".join(
            f"{p} {e['all']['mean']:.1f}%" for p, e in model.metadata["selection_error_pct"].items()))
    held = measured.take(test)
    test_err = errors_by_precision(harness_prediction(model, held, devices, floors), held)
    x, t_roof = design(rows, devices)
    train_pred = harness_time(row_floors(rows, floors), model.kernel_from_features(x, t_roof),
                              _row_sharpness(family, source, cfg), row_add_shares(model, rows))
    train_err = {g: summary(ape(train_pred, rows.latency_us)[rows.device == g]) for g in sorted(set(rows.device.tolist()))}
    log(f"{family}: {len(rows)} training rows, best step {model.metadata['early_stopping']['best_step']}, "
        f"{time.time() - t0:.0f}s; held-out shapes of {measured.device[0]}: "
        + ", ".join(f"{p} {e['all']['mean']:.1f}%" for p, e in test_err.items()))
    logo_err = {}
    if logo_dir is not None and neusight is not None:
        for g in sorted(set(neusight.device.tolist())):
            keep = rows.device != g
            m, fl = _fit_rows(rows.take(keep), source[keep], devices, cfg, device_time)
            target = rows.take(rows.device == g)
            tx, tr = design(target, devices)
            fold = _fold_floors(target, fl, set(rows.device[keep].tolist()))
            pred = soft_max(fold, m.kernel_from_features(tx, tr), cfg.floor_sharpness)
            logo_err[g] = summary(ape(pred, target.latency_us))
            m.metadata["training_data"] = {"gpus": sorted(set(rows.device[keep].tolist())), "held_out_gpu": g}
            m.metadata["training_config"] = cfg.metadata()
            _record_rows_basis(m, rows.take(keep))
            out = Path(logo_dir) / gpu_dir_name(g)
            out.mkdir(parents=True, exist_ok=True)
            m.save(out)
            log(f"  {family} without {g}: {logo_err[g]['mean']:.1f}% on it ({time.time() - t0:.0f}s)")
    measured_gpu = sorted(set(measured.device.tolist()))
    model.metadata.update({
        "training_config": cfg.metadata(),
        "training_data": {
            "source": "NeuSight kernels/ (sitar-lab/NeuSight, MIT), FP32, PyTorch 2.1, CUDA 12.1; plus "
                      "benchmarks/results/kernels/ (collect_kernels.py, "
                      + ("CUPTI device time, median of 5 runs" if device_time else "CUDA events, median of 10")
                      + "): " + ", ".join(measured_gpu),
            "ops": sorted(set(rows.op.tolist())), "gpus": sorted(set(rows.device.tolist())), "rows": int(len(rows)),
            "precisions": {p: int((rows.precision == p).sum()) for p in sorted(set(rows.precision.tolist()))},
            "measured_share_of_batches": MEASURED_SHARE},
        "split": {"rule": "leave-shapes-out: a problem (op and dimensions) is held out in every precision and "
                          "convolution pass at once (KernelArrays.problem_keys)",
                  "test_fraction": test_fraction, "seed": split_seed,
                  "function": "habitat.learned.train_precision.leave_shapes_out",
                  "test_rows": int(test.sum()), "test_problems": int(len(np.unique(measured.problem_keys()[test])))},
        "validation_error_pct": {"held_out_shapes": {g: test_err for g in measured_gpu},
                                 "leave_one_gpu_out": logo_err, "training_rows": train_err},
        "training_seconds": round(time.time() - t0, 1),
        "transfer_limits": TRANSFER_LIMITS,
    })
    _record_rows_basis(model, rows)
    return model


def _record_rows_basis(model: EfficiencyMLP, rows: KernelArrays) -> None:
    """What the engine must know about the rows a model was trained on: the layout transforms
    taken out of them (added back per op) and their shape extent (shapes below it declined)."""
    if rows.family in LAYOUT_FAMILIES:
        model.metadata["nchw_transforms"] = conv_layout.metadata()
    if rows.family in CLAMPED_FAMILIES:
        model.metadata["shape_extent"] = shape_extent(rows)


def shape_extent(rows: KernelArrays) -> dict[str, list[float]]:
    """Each shape column's least and greatest trained value. The engine does not ask a clamped
    family's model about a shape below its smallest trained one in any column (e.g. a
    convolution to 1 output channel, when training saw 3 and up): clamping each feature alone
    still leaves such a shape's feature combination unseen, and the model's answer there was
    off by 10-30x (weights/README.md)."""
    return {c: [float(v.min()), float(v.max())] for c, v in sorted(rows.shapes.items())}
