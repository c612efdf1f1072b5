"""Trains the learned efficiency models and writes weights/.

    python -m habitat.learned.train --data ../shared/data/neusight --out weights \\
        [--collections benchmarks/results/kernels/H100-SXM5-80GB-2026-11-26,...] \\
        [--traces benchmarks/results] [--families gemm,conv,...] [--no-logo] [--quick]

One model per family, every precision in it (precision is a feature), trained on every source
of habitat.learned.sources that has rows of the family: NeuSight's FP32 rows of five GPUs
(per-call timings), the kernel collections (device time where collected with it), the recorded
training steps (device time). A model predicts device time: rows timed per call are fitted
through the harness model (habitat.learned.harness), one floor per group fitted with the net.

Splits (deterministic; recorded in each model's metadata):
- test: TEST_FRACTION of the problems (op and dimensions: every precision, pass and layout of a
  problem together) of each device-time collection, chosen with numpy.random.default_rng(SPLIT_SEED)
  per collection; no source trains on a held-out problem. Its error is the
  leave-shapes-out figure (`python -m habitat.evaluate precision` recomputes it).
- validation: TrainConfig.val_fraction of the remaining problems of every source, for early
  stopping (the mean of the sources' losses, so a small source counts as much as a large one).
- leave-one-GPU-out: for each NeuSight GPU, a model trained without that GPU's rows, saved under
  logo/<GPU>/ for `python -m habitat.evaluate kernels`.

Only kernels/ of NeuSight's data is read: test/ is for evaluation.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from habitat.learned import conv_layout, harness
from habitat.learned import features as feats
from habitat.learned import sources as src
from habitat.learned.devices import DeviceTable, default_table
from habitat.learned.fitting import (
    QUICK,
    FitData,
    TrainConfig,
    _log,
    ape,
    design,
    fit,
    gpu_dir_name,
    source_weights,
    summary,
)
from habitat.learned.model import EfficiencyMLP
from habitat.learned.neusight import KernelArrays

TEST_FRACTION = 0.2
SPLIT_SEED = 0
# Share of each batch drawn from each kind of source (renormalised over the sources a family has).
SHARES = {"collection": 0.5, src.TRACES: 0.25, src.NEUSIGHT: 0.25}
# Families whose collections split the collections' share equally (batch_shares), rather than by
# their row counts: the H200's encoder attention rows of 2026-11-28 (672 rows of short sequences)
# outnumber any other collection's. Attention, 8 nets, H100 held-out mean |error| per backend and
# pass 10.0 % balanced against 11.5 % pooled (fp32 memory-efficient forward 21.3 against 20.5 %),
# the H200's held-out problems of 2026-11-27 14.3 against 16.3 %; the real models' attention class
# from CPU traces (H100): BERT-base bf16 -9.6 against +21.9 %, fp32 -6.3 against -9.4 %, ViT-B/16
# bf16 +1.2 against -2.9 %, fp32 -27.0 against -22.4 % (weights/README.md).
BALANCED_FAMILIES = ("attention",)
# Families whose net is larger than TrainConfig's: the GEMM rows of three device-time
# collections (cuBLAS's kernel choice over odd shapes) underfit a 64x64 net. H100 held-out
# problems, bmm / linear mean |error| in bf16, fp16, fp32, tf32, same rows and shares: 64x64 at
# 3000 steps 16.7, 16.3, 14.6, 13.9 / 8.0, 8.0, 11.3, 10.5 %; 128x128 at 10000 steps 13.0, 13.1,
# 10.5, 12.3 / 6.9, 6.9, 9.5, 8.5 %. Wider nets fit the H100 better still (256x256: bmm 10.2-11.9
# %) but transfer worse to a GPU they never saw: leave-one-GPU-out on NeuSight's P4 53.6 % at
# 256x256, 37.4 % at 192x192 (6000 steps), 30.3 % at 128x128 (30.7 % for the 64x64 net before).
FAMILY_NETS: dict[str, dict] = {"gemm": {"hidden": (128, 128), "steps": 10000}}
# Sources fitted with a constant factor of their own on the kernel time (fit's offset groups):
# the per-call collection of 2026-11-22 ran on another machine and harness than the device-time
# collection of 2026-11-26 the models are scored on; where the two overlap, their SDPA rows sit
# 15-20 % apart (GEMM rows agree to a few %), which a per-source factor absorbs instead of the model.
OFFSET_SOURCES = ("collection:H100-SXM5-80GB",)
# Families whose models are penalised for getting faster as a problem grows (fit's pairs), and
# the dimensions doubled to test it.
GROWN_DIMS = {"gemm": ("b", "m", "n", "k"), "attention": ("batch_heads", "l", "s")}
# Families whose inputs are clamped to the training range: a convolution's or a memory-bound
# kernel's efficiency saturates, while a GEMM's large-problem trend extrapolates (NeuSight's test/
# GEMMs reach 65536 x 50272 x 4096, far beyond any training row).
CLAMPED_FAMILIES = ("conv", "elementwise", "softmax", "layernorm", "reduction", "batchnorm")

TRANSFER_LIMITS = (
    "Tensor-core precisions (tf32, bf16, fp16) and fused attention are measured on Hopper only (the H100 "
    "collections; the recorded H100 and H200 steps). A forecast in those precisions for another GPU rests on "
    "the efficiency Hopper reaches at the same op-relative point (time over the target's own roofline for "
    "that precision, waves over its SMs, bytes over its L2) and on the target's datasheet peak. FP32 rests on "
    "NeuSight's five GPUs and Hopper. fp8 is forecast as 16-bit work on the fp8 roofline (no fp8 data).")


def source_kind(name: str) -> str:
    return "collection" if name.startswith("collection:") else name


def batch_shares(family: str, source: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    """Each row's batch group and the groups' shares of the draws (fitting.source_weights): the
    kinds of SHARES, or for BALANCED_FAMILIES each collection on its own with an equal part of
    the collections' share."""
    if family not in BALANCED_FAMILIES:
        return np.array([source_kind(s) for s in source], dtype=object), SHARES
    collections = sorted({s for s in source.tolist() if source_kind(s) == "collection"})
    shares = {k: v for k, v in SHARES.items() if k != "collection"}
    shares.update({c: SHARES["collection"] / len(collections) for c in collections})
    return np.array([s if s in collections else source_kind(s) for s in source], dtype=object), shares


def present_shares(family: str, source: np.ndarray) -> dict[str, float]:
    """The batch groups of `source`'s rows and their shares (batch_shares), as the model's JSON
    records them."""
    kinds, shares = batch_shares(family, source)
    return {k: v for k, v in shares.items() if k in set(kinds.tolist())}


# Ops a family took in after its split was first drawn, each drawn on its own: drawn with the
# others, their problems would move every other problem's fold.
SEPARATE_DRAWS = ("gconv",)


def leave_shapes_out(rows: KernelArrays, fraction: float = TEST_FRACTION, seed: int = SPLIT_SEED) -> np.ndarray:
    """Test mask: `fraction` of the distinct problems (problem_keys), in every precision and pass."""
    keys = rows.problem_keys()
    ops = np.array([k.split("|", 1)[0] for k in keys])
    mask = np.zeros(len(keys), dtype=bool)
    for draw in [~np.isin(ops, SEPARATE_DRAWS)] + [ops == op for op in SEPARATE_DRAWS]:
        unique = np.unique(keys[draw])
        chosen = np.random.default_rng(seed).choice(unique, int(round(len(unique) * fraction)), replace=False)
        mask |= draw & np.isin(keys, chosen)
    return mask


def _validation_labels(keys: np.ndarray, source: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """"val:<source>" on `fraction` of each source's problems, "" elsewhere."""
    out = np.full(len(keys), "", dtype=object)
    rng = np.random.default_rng(seed + 1)
    for s in sorted(set(source.tolist())):
        mine = source == s
        unique = np.unique(keys[mine])
        if len(unique) < 10:
            continue
        chosen = rng.choice(unique, max(1, int(len(unique) * fraction)), replace=False)
        out[mine & np.isin(keys, chosen)] = f"val:{s}"
    return out


def grown_rows(rows: KernelArrays, seed: int) -> KernelArrays:
    """Each row's problem with one dimension (GROWN_DIMS) doubled: same op, GPU, precision."""
    dims = GROWN_DIMS[rows.family]
    pick = np.random.default_rng(seed + 2).integers(0, len(dims), len(rows))
    shapes = {c: v.copy() for c, v in rows.shapes.items()}
    for i, d in enumerate(dims):
        shapes[d][pick == i] *= 2.0
    return rows.with_(shapes=shapes)


def monotone_pairs(rows: KernelArrays, devices: DeviceTable, seed: int):
    """Pairs for fit's size-monotonicity penalty: every training problem with one dimension
    doubled, on its own GPU and precision, and again on a GPU and precision of the database
    drawn at random (the penalty needs no measurement, so it reaches GPUs and precisions the
    data do not: fp16 on a T4, tf32 on an A100)."""
    rng = np.random.default_rng(seed + 3)
    names = np.array([d.name for d in devices.devices], dtype=object)
    precisions = np.array(["fp32", "tf32", "bf16", "fp16"], dtype=object)
    prec = precisions[rng.integers(0, len(precisions), len(rows))]
    if rows.family == "attention":  # flash attention has no tf32 variant
        prec = np.where(prec == "tf32", "fp32", prec)
    shapes = {c: v.copy() for c, v in rows.shapes.items()}
    shapes["elem_bytes"] = np.where(np.isin(prec, ["bf16", "fp16"]), 2.0, 4.0)
    elsewhere = rows.with_(device=names[rng.integers(0, len(names), len(rows))], precision=prec, shapes=shapes)
    a, b = [], []
    for base in (rows, elsewhere):
        a.append(design(base, devices))
        b.append(design(grown_rows(base, seed), devices))
    return (np.concatenate([x for x, _ in a]), np.concatenate([t for _, t in a]),
            np.concatenate([x for x, _ in b]), np.concatenate([t for _, t in b]))


def _fit_rows(data: src.Rows, devices: DeviceTable, cfg: TrainConfig) -> tuple[EfficiencyMLP, dict[str, float]]:
    """One model on `data`; returns it and its fitted floor per floor key."""
    rows = data.rows
    x, t_roof = design(rows, devices)
    keys = sorted(set(data.floor_key.tolist()) - {""})
    group = np.array([keys.index(k) if k else -1 for k in data.floor_key])
    labels = _validation_labels(rows.problem_keys(), data.source, cfg.val_fraction, cfg.seed)
    kinds, shares = batch_shares(rows.family, data.source)
    pairs = monotone_pairs(rows, devices, cfg.seed) if rows.family in GROWN_DIMS else None
    offset_sources = sorted({s for s in data.source.tolist() if s in OFFSET_SOURCES})
    offset_group = np.array([offset_sources.index(s) if s in offset_sources else -1 for s in data.source])
    model = fit(rows.family, FitData(x, t_roof, rows.latency_us, group, labels, source_weights(kinds, shares), pairs,
                                     data.measurement, data.scale, offset_group), cfg)
    floors = dict(zip(keys, model.metadata.pop("floors_us")))
    factors = model.metadata.pop("source_factors")
    if offset_sources:
        model.metadata["source_factors"] = {
            "factors": dict(zip(offset_sources, (round(f, 4) for f in factors))),
            "note": "kernel times of these sources sit this factor off the reference (device-time) sources: "
                    "fitted with the net, not part of any forecast (train.OFFSET_SOURCES)"}
    return model, floors


def harness_floors(floors: dict[str, float]) -> dict:
    """The metadata of NeuSight's fitted floors: per op and GPU, and their median per op (what
    habitat.evaluate adds to a kernel forecast to compare with NeuSight's rows)."""
    per: dict[str, dict[str, float]] = {}
    for key, us in floors.items():
        name, *rest = key.split("|")
        if name == src.NEUSIGHT:
            gpu, op = rest
            per.setdefault(op, {})[gpu] = round(us, 3)
    return {"per_gpu": per, "median": {op: float(np.median(list(v.values()))) for op, v in per.items()},
            "form": "harness time = kernel + floor (1 + r / (1 + kernel / knee_us)) (habitat.learned.harness)",
            "r": harness.SHAPE_RATIO, "knee_us": harness.KNEE_US}


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


def predictions(model: EfficiencyMLP, data: src.Rows, devices: DeviceTable,
                floors: dict[str, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each measurement's forecast as it was timed, its measured time, its first row), one
    entry per measurement: the summed kernel times of its parts for device time, the harness time
    behind its own fitted floor (or its op's median over the model's GPUs) for per-call rows."""
    x, t_roof = design(data.rows, devices)
    k = model.kernel_from_features(x, t_roof) * data.scale
    ids, first, inverse = np.unique(data.measurement, return_index=True, return_inverse=True)
    total = np.bincount(inverse, weights=k)
    median = harness_floors(floors)["median"]
    rows = data.rows
    f = np.array([floors.get(data.floor_key[i], median.get(rows.op[i].split("|")[-1], 0.0))
                  if data.floor_key[i] else 0.0 for i in first])
    return np.where(f > 0, harness.harness_time(rows.family, f, total), total), rows.latency_us[first], first


def train_family(family: str, sources: list[src.Source], devices: DeviceTable, cfg: TrainConfig,
                 logo_dir: Path | None = None, log=_log, held_out: np.ndarray | None = None) -> EfficiencyMLP:
    """`held_out`: the problem keys to hold out of the device-time collections (default:
    leave_shapes_out's of each; benchmarks/accuracy/kfold.py passes each fold's)."""
    t0 = time.time()
    data = src.concat(sources)
    device_time = [s for s in sources if s.name.startswith("collection:") and (s.rows.timing == "device").any()]
    test = np.zeros(len(data.rows), dtype=bool)
    split: dict = {"rule": "no device-time collection: no held-out shapes"}
    if device_time:
        first = device_time[0]
        held_keys = (np.unique(np.concatenate([s.rows.problem_keys()[leave_shapes_out(s.rows)] for s in device_time]))
                     if held_out is None else np.asarray(held_out))
        keys = data.rows.problem_keys()
        test = np.isin(data.source, [s.name for s in device_time]) & np.isin(keys, held_keys)
        # no source trains on a held-out problem (a problem measured elsewhere too)
        drop = ~test & np.isin(keys, held_keys)
        data, test = data.take(~drop), test[~drop]
        split = {"rule": "leave-shapes-out: a problem (op and dimensions) is held out in every precision, pass and "
                         "layout at once (KernelArrays.problem_keys), from every source",
                 "collection": first.name, "collections": [s.name for s in device_time],
                 "test_fraction": TEST_FRACTION, "seed": SPLIT_SEED,
                 "function": "habitat.learned.train.leave_shapes_out", "test_rows": int(test.sum()),
                 "test_rows_by_collection": {s.name: int((test & (data.source == s.name)).sum()) for s in device_time},
                 "test_problems": int(len(held_keys))}
    train = data.take(~test)
    model, floors = _fit_rows(train, devices, cfg)
    test_err = {}
    if test.any():
        held = data.take(test)
        pred, _, first = predictions(model, held, devices, floors)
        test_err = errors_by_precision(pred, held.rows.take(first))
    pred, meas, first = predictions(model, train, devices, floors)
    src_of = train.source[first]
    train_err = {s: summary(ape(pred, meas)[src_of == s]) for s in sorted(set(src_of))}
    log(f"{family}: {len(train.rows)} training rows, best step {model.metadata['early_stopping']['best_step']}, "
        f"{time.time() - t0:.0f}s; held-out shapes: "
        + ", ".join(f"{p} {e['all']['mean']:.1f}%" for p, e in test_err.items()))
    logo_err = {}
    ns = train.source == src.NEUSIGHT
    if logo_dir is not None and ns.any():
        for g in sorted(set(train.rows.device[ns].tolist())):
            mine = ns & (train.rows.device == g)
            m, fl = _fit_rows(train.take(~mine), devices, cfg)
            tgt = train.rows.take(mine)
            x, t_roof = design(tgt, devices)
            k = m.kernel_from_features(x, t_roof)
            median = harness_floors(fl)["median"]
            f = np.array([median.get(op, np.median(list(median.values()))) for op in tgt.op])
            logo_err[g] = summary(ape(harness.harness_time(family, f, k), tgt.latency_us))
            m.metadata["harness_floor_us"] = harness_floors(fl)
            m.metadata["training_data"] = {"held_out_gpu": g, "gpus": sorted(set(train.rows.device[~mine].tolist()))}
            m.metadata["training_config"] = cfg.metadata()
            out = Path(logo_dir) / gpu_dir_name(g)
            out.mkdir(parents=True, exist_ok=True)
            finish(m, family)
            m.save(out)
            log(f"  {family} without {g}: {logo_err[g]['mean']:.1f}% on it ({time.time() - t0:.0f}s)")
    model.metadata.update({
        "training_config": cfg.metadata(),
        "training_data": {
            "sources": {s.name: int((train.source == s.name).sum()) for s in sources},
            "shares_of_batches": present_shares(family, train.source),
            "workloads": sorted(set(train.workload.tolist()) - {""}),
            "gpus": sorted(set(train.rows.device.tolist())),
            "precisions": {p: int((train.rows.precision == p).sum())
                           for p in sorted(set(train.rows.precision.tolist()))},
            "note": "rows carry the precision of the units their kernels ran on (habitat.learned.kernel_paths)"},
        "split": split,
        "harness_floor_us": harness_floors(floors),
        "fitted_floors_us": {k: round(v, 3) for k, v in floors.items()},
        "validation_error_pct": {"held_out_shapes": test_err, "leave_one_gpu_out": logo_err,
                                 "training_measurements": train_err},
        "training_seconds": round(time.time() - t0, 1),
        "transfer_limits": TRANSFER_LIMITS,
    })
    finish(model, family)
    return model


def finish(model: EfficiencyMLP, family: str) -> None:
    """Family-specific metadata the engine reads (the conv model's layout transforms)."""
    if family == "conv":
        model.metadata["nchw_transforms"] = conv_layout.metadata()


def family_sources(family: str, args: argparse.Namespace, devices: DeviceTable) -> list[src.Source]:
    out: list[src.Source | None] = [src.collection(d, family, devices) for d in args.collections]
    if args.traces:
        traced = src.traces(args.traces, family, tuple(r for r in (args.runs or "").split(",") if r) or None)
        excluded = [w for w in (getattr(args, "exclude_workloads", None) or "").split(",") if w]
        if traced is not None and excluded:
            keep = ~np.isin(traced.workload, excluded)
            traced = src.Source(traced.name, traced.rows.take(keep), traced.floor_key[keep], traced.workload[keep],
                                traced.measurement[keep], traced.scale[keep]) if keep.any() else None
        out.append(traced)
    if args.data:
        out.append(src.neusight(args.data, family))
    return [s for s in out if s is not None]


def parser() -> argparse.ArgumentParser:
    """The command line of `python -m habitat.learned.train` (benchmarks/accuracy/kfold.py reads a
    shipped model's `training_command` with it)."""
    p = argparse.ArgumentParser(prog="python -m habitat.learned.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help="NeuSight data directory (reads its kernels/ only)")
    p.add_argument("--collections", default="",
                   help="comma-separated collect_kernels.py outputs of one GPU each (device time first: its "
                        "problems give the held-out split)")
    p.add_argument("--traces", default=None, help="benchmarks/results: holds <run>/traces/*.json.gz")
    p.add_argument("--runs", default=None, help="comma-separated result folders of --traces to read "
                                                "(default: habitat.learned.traces.RUNS)")
    p.add_argument("--exclude-workloads", default=None,
                   help="comma-separated traced workloads whose ops do not train (leave-one-workload-out "
                        "models for the kernel-sum benchmark, which runs these workloads)")
    p.add_argument("--out", required=True, help="directory for <family>.safetensors and <family>.json")
    p.add_argument("--families", default=",".join(feats.FAMILIES))
    p.add_argument("--devices", default=None, help="devices.json (default: the package's)")
    p.add_argument("--quick", action="store_true", help="few steps on a subsample (smoke test)")
    p.add_argument("--no-logo", action="store_true", help="skip the leave-one-GPU-out models")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--members", type=int, default=1, help="independently seeded nets averaged per model")
    p.add_argument("--shares", default=None,
                   help="batch shares per kind of source, e.g. collection=0.6,traces=0.2,neusight=0.2 "
                        f"(default {','.join(f'{k}={v}' for k, v in SHARES.items())})")
    return p


def apply_shares(text: str) -> None:
    """Sets SHARES from --shares' kind=share pairs; ValueError names the expected form."""
    try:
        shares = {k: float(v) for k, v in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise ValueError(f"--shares {text!r}: expected kind=share pairs, e.g. collection=0.6,neusight=0.4") from None
    SHARES.update(shares)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.shares:
        try:
            apply_shares(args.shares)
        except ValueError as e:
            p.error(str(e))
    args.collections = [c for c in args.collections.split(",") if c]
    families = [f for f in args.families.split(",") if f]
    unknown = set(families) - set(feats.FAMILIES)
    if unknown:
        p.error(f"unknown families {', '.join(sorted(unknown))}; known: {', '.join(feats.FAMILIES)}")
    base = QUICK if args.quick else TrainConfig()
    devices = DeviceTable.load(args.devices) if args.devices else default_table()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m habitat.learned.train " + " ".join(argv if argv is not None else sys.argv[1:])
    for family in families:
        sources = family_sources(family, args, devices)
        if not sources:
            print(f"{family}: no rows in the given sources, skipped")
            continue
        net = {} if args.quick else FAMILY_NETS.get(family, {})
        cfg = TrainConfig(**{**base.__dict__, **net, "seed": args.seed, "members": args.members,
                             "clamp_inputs": family in CLAMPED_FAMILIES})
        model = train_family(family, sources, devices, cfg, None if args.no_logo else out / "logo")
        model.metadata["training_command"] = command
        model.save(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
