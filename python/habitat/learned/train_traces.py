"""Trains the memory-bound families (elementwise, softmax, layernorm) on NeuSight's FP32 rows plus
the kernels of recorded H100/H200 training steps (habitat.learned.traces), and scores them
leave-one-workload-out (LOWO) on those traces.

    python -m habitat.learned.train_traces --data NEUSIGHT_DATA --traces benchmarks/results \\
        [--out weights] [--families elementwise,softmax,layernorm] [--lowo] [--quick]

Sources: NeuSight's kernels/ rows (per-call timings: a 25-60 us harness floor merged with the
kernel, fitted as in habitat.learned.train) and the trace rows (CUPTI kernel durations: no floor;
their floor is TRACE_FLOOR_US, negligible). Each batch draws TRACE_SHARE of its rows from the
trace rows, the rest from NeuSight's.

How long to train: GPU folds as in habitat.learned.train, over every training GPU (NeuSight's
five and the traced Hopper GPUs): for each training GPU v a net is trained without v and
validated on v; the step with the least mean loss is kept.

--lowo: for each of the four traced workloads, a model trained on NeuSight plus the other three
workloads' trace rows (its step count chosen from those alone) forecasts the held-out workload's
ops; the before/after table compares it with the current weights on the same ops. The
benchmarks/accuracy/real_models.py workloads are these four, so only the LOWO figures are a
held-out score for models trained on all four.

--collection DIR --train-rows collection|both: the device-time rows of a kernel collection of
one GPU (benchmarks/gpu/collect_kernels.py, `Kernel Latency`: grids of shapes in fp32 and bf16,
no harness floor) train too, in every model (they are no workload's). With `collection` no trace
row trains, so --lowo scores one model on every traced op: a test on real training steps the
model never saw. (Written 2026-11-23 before any such collection existed: only synthetic rows
have been through it, tests/python/learned/test_trace_rows.py.)

--out: the shipped models (all NeuSight rows, every workload's trace rows) and, unless
--no-logo, the leave-one-GPU-out models logo/<GPU>/ for NeuSight's GPUs (habitat.evaluate).

Status (2026-11-23): the weights/ models of these families are not from this trainer. Its models
cut the leave-one-workload-out error (elementwise ops >= 5 us 45.5 -> 12.0 %, layer norm 115.9 ->
33.2 %) but regressed a NeuSight figure (elementwise test/, layer-norm kernels/ leave-one-GPU-out);
softmax got worse. Figures and candidates: weights/README.md, "on Hopper".
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from habitat.learned import traces as tr
from habitat.learned.devices import DeviceTable, default_table
from habitat.learned.features import MEMORY_FAMILIES
from habitat.learned.fitting import (
    QUICK,
    GpuFolds,
    TrainConfig,
    _harness_metadata,
    _harness_prediction,
    _log,
    ape,
    design,
    fit,
    gpu_dir_name,
    harness_floors,
    row_floors,
    source_weights,
    summary,
)
from habitat.learned.model import EfficiencyMLP
from habitat.learned.neusight import OP_FAMILY, KernelArrays, load_kernels

FAMILIES = MEMORY_FAMILIES
# Share of each batch drawn from the trace rows (the rest from NeuSight's).
TRACE_SHARE = 0.5
# The models' launch floor (metadata launch_floor_us: no forecast below it) is the median CUPTI
# duration of the training trace rows with next to no work (roofline under TINY_ROOFLINE_US:
# scalar fills, step counters): the device time of one kernel that does nothing, as measured.
# NeuSight's harness floor hides it; without trace rows it stays fitting.LAUNCH_FLOOR_US.
TINY_ROOFLINE_US = 0.01
# How the GPU folds' held-out losses are averaged: "sources" (NeuSight's GPUs and the traced ones
# weigh half each; the default) or "gpus" (every GPU alike, as habitat.learned.train does).
FoldWeighting = Literal["sources", "gpus"]
NEUSIGHT = "neusight"
# The engine op classes whose trace rows train each family: every class the engine forecasts
# with that family's model. The layer-norm model also serves the row reductions (sum, mean,
# norms: learned_model.cpp reduction_parts), so their rows train it too; leaving them out made
# its leave-one-workload-out error on the reductions worse (85.9 -> 112.4 %) and on layer norm
# barely better (115.9 -> 97.0 %), with them 38.3 % and 33.2 %.
TRAIN_CLASSES: dict[str, tuple[str, ...]] = {"elementwise": ("elementwise",), "softmax": ("softmax",),
                                             "layernorm": ("norm", "reduction")}


def combine(neusight: KernelArrays, trace: tr.TraceRows | None,
            workloads: set[str] | None = None) -> tuple[KernelArrays, np.ndarray]:
    """NeuSight's rows plus the trace rows of `workloads` (None: all) and any kernel collection's
    rows (no workload's: always kept); the source of each row ("neusight", the trace row's
    workload or traces.COLLECTION)."""
    parts, source = [neusight], [np.full(len(neusight), NEUSIGHT, dtype=object)]
    if trace is not None:
        keep = (np.ones(len(trace.rows), dtype=bool) if workloads is None
                else np.isin(trace.workload, sorted(workloads)) | (trace.workload == tr.COLLECTION))
        if keep.any():
            parts.append(trace.rows.take(keep))
            source.append(trace.workload[keep].astype(object))
    return KernelArrays.concat(parts), np.concatenate(source)


def floors_for(rows: KernelArrays, source: np.ndarray, t_roof: np.ndarray) -> dict[str, dict[str, float]]:
    """NeuSight's harness floors per (op, GPU) (habitat.learned.fitting.harness_floors) and the
    negligible TRACE_FLOOR_US for every trace op."""
    ns = source == NEUSIGHT
    floors = harness_floors(rows.take(ns), t_roof[ns])
    for op, gpu in sorted(set(zip(rows.op[~ns].tolist(), rows.device[~ns].tolist()))):
        floors.setdefault(op, {})[gpu] = tr.TRACE_FLOOR_US
    return floors


def weights(source: np.ndarray) -> np.ndarray:
    """TRACE_SHARE of the weight on the trace rows, the rest on NeuSight's."""
    return source_weights(source, TRACE_SHARE, NEUSIGHT)


def train_rows(rows: KernelArrays, source: np.ndarray, devices: DeviceTable, cfg: TrainConfig,
               log=_log, fold_weighting: FoldWeighting = "sources") -> EfficiencyMLP:
    """One model on `rows`, its step count from GPU folds over its own training GPUs (each fold
    with the sources' batch shares; their losses averaged as `fold_weighting` says)."""
    x, t_roof = design(rows, devices)
    floors = floors_for(rows, source, t_roof)
    floor_us = row_floors(rows, floors)
    gpus = sorted(np.unique(rows.device).tolist())
    traced = set(rows.device[source != NEUSIGHT].tolist())
    folds = GpuFolds(rows, x, t_roof, cfg, floors=lambda train: floor_us,
                     train_weights=lambda mask: weights(source[mask]),
                     # per source, NeuSight's five GPUs would otherwise outvote the traced two
                     group_of=traced.__contains__ if fold_weighting == "sources" else None,
                     rule="least mean loss on GPUs held out in turn from the training GPUs "
                          "(NeuSight's and the traced ones)")
    step, selection = folds.best_step(gpus)
    m = fit(rows.family, x, t_roof, rows.latency_us, cfg, floor_us, rows.shape_keys(), stop_at=step,
            sample_weight=weights(source))
    tiny = (source != NEUSIGHT) & (t_roof < TINY_ROOFLINE_US)
    if tiny.any():
        m.metadata["launch_floor_us"] = round(float(np.median(rows.latency_us[tiny])), 3)
        m.metadata["launch_floor_rule"] = (
            f"median CUPTI duration of the {int(tiny.sum())} training trace rows with a roofline under "
            f"{TINY_ROOFLINE_US} us (habitat.learned.train_traces.TINY_ROOFLINE_US)")
    ns_gpus = sorted(set(rows.device[source == NEUSIGHT].tolist()))
    ns_floors = {op: per for op, per in floors.items() if not op.startswith((tr.OP_PREFIX, tr.COLLECTION_PREFIX))}
    m.metadata["harness_floor_us"] = _harness_metadata(ns_floors, ns_gpus, cfg.floor_sharpness)
    m.metadata["harness_floor_us"]["trace_rows"] = (
        "the trace rows are CUPTI kernel durations: fitted with a floor of "
        f"{tr.TRACE_FLOOR_US} us (none), not listed here")
    m.metadata["training_config"] = cfg.metadata()
    m.metadata["step_selection"] = selection
    return m


def lowo(family: str, neusight: KernelArrays, trace: tr.TraceRows, ops: list[tr.TraceOp], devices: DeviceTable,
         cfg: TrainConfig, log=_log, fold_weighting: FoldWeighting = "sources") -> dict:
    """Leave-one-workload-out: per workload, the model trained without its trace rows forecasts
    its ops; returns the before (engine_us: the current weights) / after error tables. When the
    training rows hold no trace row (NeuSight and a kernel collection only), one model trained
    on them all forecasts every op: every workload is held out at once."""
    mine = [o for o in ops if len(o.parts) == 1 and o.parts[0][0] == family]
    pred = np.full(len(mine), np.nan)
    wl = np.array([o.workload for o in mine])
    traced = trace is not None and bool(np.isin(trace.workload, tr.WORKLOADS).any())
    held_out = [{w} for w in tr.WORKLOADS] if traced else [set(tr.WORKLOADS)]
    for ws in held_out:
        sel = np.nonzero(np.isin(wl, sorted(ws)))[0]
        if len(sel) == 0:
            continue
        t0 = time.time()
        rows, source = combine(neusight, trace, set(tr.WORKLOADS) - ws)
        m = train_rows(rows, source, devices, cfg, log, fold_weighting)
        pred[sel] = tr.forecast_us([mine[i] for i in sel], {family: m}, devices)
        log(f"  {family} without {', '.join(sorted(ws))}: {m.metadata['early_stopping']['best_step']} steps, "
            f"{time.time() - t0:.0f}s")
    before = np.array([o.engine_us for o in mine])
    return {"before": tr.error_table(mine, before), "after": tr.error_table(mine, pred),
            "per_workload": {w: {"before": tr.error_table([mine[i] for i in np.nonzero(wl == w)[0]],
                                                          before[wl == w]),
                                 "after": tr.error_table([mine[i] for i in np.nonzero(wl == w)[0]], pred[wl == w])}
                             for w in tr.WORKLOADS if (wl == w).any()}}


def train_family(family: str, neusight: KernelArrays, trace: tr.TraceRows, devices: DeviceTable, cfg: TrainConfig,
                 logo_dir: Path | None, log=_log, fold_weighting: FoldWeighting = "sources") -> EfficiencyMLP:
    """The shipped model (every row) after the leave-one-GPU-out ones for NeuSight's GPUs."""
    t0 = time.time()
    rows, source = combine(neusight, trace)
    logo_err = {}
    if logo_dir is not None:
        for g in sorted(set(neusight.device.tolist())):
            keep = rows.device != g
            m = train_rows(rows.take(keep), source[keep], devices, cfg, log, fold_weighting)
            held = neusight.take(neusight.device == g)
            x, t_roof = design(held, devices)
            logo_err[g] = summary(ape(_harness_prediction(m, x, t_roof, held.op), held.latency_us))
            m.metadata["training_data"] = {"gpus": sorted(set(rows.device[keep].tolist())), "held_out_gpu": g}
            target = Path(logo_dir) / gpu_dir_name(g)
            target.mkdir(parents=True, exist_ok=True)
            m.save(target)
            log(f"  {family} without {g}: {logo_err[g]['mean']:.1f}% on it ({time.time() - t0:.0f}s)")
    model = train_rows(rows, source, devices, cfg, log, fold_weighting)
    trace_rows = source != NEUSIGHT
    workloads = sorted(set(source[np.isin(source, tr.WORKLOADS)].tolist()))
    collected = int((source == tr.COLLECTION).sum())
    model.metadata.update({
        "training_data": {
            "source": "NeuSight kernels/ (sitar-lab/NeuSight, MIT), FP32, PyTorch 2.1, CUDA 12.1"
                      + ("; plus the CUPTI kernel durations of the recorded H100/H200 training steps "
                         "(benchmarks/results/<run>/traces, habitat.learned.traces): workloads " + ", ".join(workloads)
                         if workloads else "")
                      + ("; plus a kernel collection's device times (collect_kernels.py Kernel Latency)"
                         if collected else ""),
            "ops": sorted(np.unique(rows.op).tolist()), "gpus": sorted(np.unique(rows.device).tolist()),
            "rows": int(len(rows)), "trace_rows": int(trace_rows.sum()), "trace_share_of_batches": TRACE_SHARE,
            "of_which_kernel_collection": collected,
            "note": ("trained on traced workloads: benchmarks/accuracy/real_models.py scores these same "
                     "workloads, so for this family its figures are not held out; the held-out figure is the "
                     "leave-one-workload-out one (python -m habitat.learned.train_traces --lowo)") if workloads
            else "no traced workload trained this model: its figures on the traces are held out"},
        "validation_error_pct": {"leave_one_gpu_out": logo_err},
        "training_seconds": round(time.time() - t0, 1),
    })
    log(f"{family}: {len(rows)} rows ({int(trace_rows.sum())} trace), "
        f"{model.metadata['early_stopping']['best_step']} steps, {time.time() - t0:.0f}s")
    return model


def measured_rows(ops: list[tr.TraceOp], family: str, which: str, collection: str | None) -> tr.TraceRows | None:
    """The training rows beside NeuSight's: the traces' (`which` "traces" or "both") and the
    kernel collection's ("collection" or "both")."""
    parts = []
    if which in ("traces", "both"):
        parts.append(tr.training_rows(ops, family, TRAIN_CLASSES[family]))
    if which in ("collection", "both"):
        parts.append(tr.collection_rows(collection, family))
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return tr.TraceRows(KernelArrays.concat([p.rows for p in parts]), np.concatenate([p.workload for p in parts]))


def _fmt_table(name: str, table: dict) -> str:
    lines = []
    for fam, row in table.items():
        lines.append(f"{name:8s} {fam:12s} " + "  ".join(
            f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m habitat.learned.train_traces", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="NeuSight data directory (reads its kernels/ only)")
    p.add_argument("--traces", required=True, help="benchmarks/results: holds <run>/traces/*.json.gz")
    p.add_argument("--runs", default=",".join(tr.RUNS))
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--out", default=None, help="write the shipped models (and logo/) here")
    p.add_argument("--no-logo", action="store_true")
    p.add_argument("--lowo", action="store_true", help="score leave-one-workload-out on the traces")
    p.add_argument("--lowo-json", default=None, help="write the LOWO tables here")
    p.add_argument("--quick", action="store_true", help="few steps on a subsample (smoke test)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ignore-features", default="",
                   help="comma list of features the models may not use (TrainConfig.ignore_features)")
    p.add_argument("--members", type=int, default=1, help="independently seeded nets averaged per model")
    p.add_argument("--fold-weighting", choices=get_args(FoldWeighting), default="sources",
                   help="average the GPU folds' losses per source (default) or per GPU")
    p.add_argument("--collection", default=None,
                   help="a kernel collection of one GPU with device times (benchmarks/gpu/collect_kernels.py "
                        "'Kernel Latency'): its rows train too, in every model")
    p.add_argument("--train-rows", choices=("traces", "collection", "both"), default="traces",
                   help="which measured rows train beside NeuSight's; 'collection' leaves every trace row out "
                        "(--lowo then scores one model on every traced op)")
    args = p.parse_args(argv)
    if (args.train_rows != "traces") != (args.collection is not None):
        p.error("--collection DIR goes with --train-rows collection or both")
    families = [f for f in args.families.split(",") if f]
    unknown = set(families) - set(FAMILIES)
    if unknown:
        p.error(f"unknown families {sorted(unknown)}; this trainer knows {', '.join(FAMILIES)}")
    command = "python -m habitat.learned.train_traces " + " ".join(argv if argv is not None else sys.argv[1:])
    cfg = QUICK if args.quick else TrainConfig()
    cfg = TrainConfig(**{**cfg.__dict__, "seed": args.seed,
                         "ignore_features": tuple(f for f in args.ignore_features.split(",") if f),
                         "members": args.members})
    devices = default_table()
    data = load_kernels(args.data, "kernels", {op for op, f in OP_FAMILY.items() if f in families})
    ops = tr.load_trace_ops(args.traces, tuple(r for r in args.runs.split(",") if r))
    results = {}
    for family in families:
        trace = measured_rows(ops, family, args.train_rows, args.collection)
        if trace is None or family not in data:
            print(f"{family}: no rows, skipped")
            continue
        if args.lowo:
            results[family] = lowo(family, data[family], trace, ops, devices, cfg, fold_weighting=args.fold_weighting)
            print(_fmt_table("before", results[family]["before"]))
            print(_fmt_table("after", results[family]["after"]))
        if args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            model = train_family(family, data[family], trace, devices, cfg, None if args.no_logo else out / "logo",
                                 fold_weighting=args.fold_weighting)
            model.metadata["training_command"] = command
            model.save(out)
    if args.lowo_json:
        Path(args.lowo_json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
