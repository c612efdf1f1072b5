"""Per-op accuracy on the families a training step runs besides GEMMs and attention (batch norm,
grouped and depthwise convolutions, 1x1 convolutions, activations, element-wise ops, sum/mean,
embedding, cross-entropy), shape-based, on a device-time kernel collection: each row traced on
the CPU as a user's step would record it (family_steps.py), forecast by the engine for the
collection's GPU with the installed weights, against the kernels measured (`Kernel Latency`).

    python benchmarks/accuracy/family_kernels.py [--data DIR] [--gpu NAME] [--json OUT] [--holdout]
        [--ops a,b] [--rows OUT] [--before ROWS]

Per group (CSV op, phase, precision, layout): rows, mean |error| %, signed mean %, the error of
the group's summed time, and the method the engine forecast the op by (habitat.data.op_rows
METHODS: learned_shape, roofline). `--holdout` scores only the rows no fitted part of the
installed weights saw: for a learned model trained on this collection (its metadata's sources),
the rows of the problems its leave-shapes-out split held out (habitat.learned.train, recomputed
from the metadata); for roofline.json, the rows habitat.learned.family_table kept out; every row
of a family no model trained on here. `--rows` writes each row's measured and forecast time;
`--before` reads such a file written by another build (its engine and weights) and scores it on
the same rows, beside this build's forecasts: a change's before and after on one set of rows.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from family_steps import STEM_FAMILY, Row, Templates  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = ROOT / "benchmarks" / "results" / "kernels" / "H100-SXM5-80GB-2026-11-26-families"
DEFAULT_GPU = "H100-SXM5-80GB"
SHAPE_COLUMNS = ("B", "H", "Dim", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Depth", "Stride",
                 "Padding", "Groups", "Layout", "Vocab", "Tokens", "Classes")


def read_rows(data: Path) -> list[Row]:
    """Every row of the collection whose case family_steps.py traces, with its device time."""
    rows = []
    for path in sorted(data.glob("*.csv")):
        stem, _, precision = path.stem.rpartition("_")
        if stem not in STEM_FAMILY:
            continue
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                us = float(r.get("Kernel Latency") or 0) * 1e3
                if us <= 0:
                    continue
                shape: dict[str, Any] = {k: (r[k] if k == "Layout" else int(float(r[k])))
                                         for k in SHAPE_COLUMNS if r.get(k) not in (None, "")}
                rows.append(Row(stem, r["OPName"], r["Phase"], precision, shape, us))
    return rows


def forecast_steps(rows: list[Row], gpu: str, templates: Templates) -> list[tuple[list[dict[str, Any]], Any]]:
    """Each row's traced step (its ops) and the engine's per-op forecast of it on `gpu`
    (habitat.data.op_rows.OpRows), with the weights installed. The rows of one precision share a
    trace whose origin holds that precision's TF32 switches (an fp32 row ran with TF32 off, its
    convolutions and matmuls on SIMT kernels), as a user's trace under them would."""
    from kernel_case import precision_context

    from habitat.capture.environment import trace_origin
    from habitat.data import engine

    out: list[tuple[list[dict[str, Any]], Any]] = [([], None)] * len(rows)
    for precision in sorted({r.precision for r in rows}):
        mine = [i for i, r in enumerate(rows) if r.precision == precision]
        steps = [{"index": k, "wall_ms": 1.0, "ops": templates.step_ops(rows[i])} for k, i in enumerate(mine)]
        with precision_context(precision):
            origin = trace_origin("cpu")
        _, forecasts = engine.forecast_trace(engine.trace_document(origin, steps), [gpu])
        for i, step, (_, _, _, _, op_rows) in zip(mine, steps, forecasts):
            out[i] = (step["ops"], op_rows)
    return out


def forecast(rows: list[Row], gpu: str, templates: Templates) -> tuple[np.ndarray, list[str]]:
    """Each row's forecast kernel time on `gpu` (us: its step's summed op shares) and the method
    of its largest share."""
    from habitat.data.op_rows import METHODS

    times, methods = np.zeros(len(rows)), []
    for i, (_, op_rows) in enumerate(forecast_steps(rows, gpu, templates)):
        a = op_rows.array
        share = a["share_us"][:, 0]
        times[i] = float(share.sum())
        methods.append(METHODS[int(a["share_method"][int(np.argmax(share)), 0])] if len(a) else "none")
    return times, methods


def loader_op(r: Row) -> str:
    """The row's op as habitat.learned.neusight names it (a backward pass: <op>_bwd...)."""
    if r.phase == "fwd":
        return r.op
    return f"{r.op}_bwd" if r.op == "bn" else f"{r.op}_{r.phase}"


def learned_held_keys(family: str, weights: Path, data: Path) -> set[str] | None:
    """The held-out problem keys of the installed model of `family` when it trained on `data`
    (None: it did not)."""
    from habitat.learned import sources as src
    from habitat.learned.devices import default_table
    from habitat.learned.train import TEST_FRACTION, leave_shapes_out

    path = weights / f"{family}.json"
    if not path.is_file():
        return None
    meta = json.loads(path.read_text())
    if f"collection:{data.name}" not in meta.get("training_data", {}).get("sources", {}):
        return None
    split = meta.get("split", {})
    held: set[str] = set()
    for name in split.get("collections", [split["collection"]] if "collection" in split else []):
        rows = src.collection(data.parent / name.removeprefix("collection:"), family, default_table())
        if rows is not None:
            keys = rows.rows.problem_keys()
            held |= set(keys[leave_shapes_out(rows.rows, split.get("test_fraction", TEST_FRACTION),
                                              split.get("seed", 0))])
    return held


def unseen(rows: list[Row], weights: Path, data: Path) -> list[Row]:
    """The rows no fitted part of `weights` saw (module docstring)."""
    from habitat.learned import family_table
    from habitat.learned.neusight import ELEM_BYTES, OP_FAMILY, is_depthwise, problem_key, row_shape

    held: dict[str, set[str] | None] = {}
    out = []
    for r in rows:
        op = loader_op(r)
        family = OP_FAMILY.get(op)
        if family is not None and not is_depthwise(r.shape):  # a depthwise row is the table's
            if family not in held:
                held[family] = learned_held_keys(family, weights, data)
            keys = held[family]
            columns = {k: str(v) for k, v in r.shape.items()}
            if keys is None or problem_key(op, row_shape(op, columns, ELEM_BYTES[r.precision])) in keys:
                out.append(r)
        elif (r.op not in family_table.FIT_OPS and r.op not in family_table.STRUCTURE_FIT_OPS) \
                or family_table.held_out(r.stem, r.shape):
            out.append(r)
    return out


def group_of(r: Row) -> tuple[str, str, str, str]:
    op = r.op
    if r.op == "gconv":
        from habitat.learned.neusight import is_depthwise

        op = "gconv depthwise" if is_depthwise(r.shape) else "gconv grouped"
    return (op, r.phase, r.precision, str(r.shape.get("Layout", "")))


def row_key(r: Row) -> str:
    """A row's identity across builds: its file stem, op, phase, precision and shape columns."""
    return "|".join([r.stem, r.op, r.phase, r.precision] + [f"{k}={r.shape[k]}" for k in sorted(r.shape)])


def before_of(rows: list[Row], path: Path) -> np.ndarray:
    """Each row's forecast in the `--rows` file of another build (NaN where it has none)."""
    earlier = {e["key"]: e["forecast_us"] for e in json.loads(path.read_text())}
    return np.array([earlier.get(row_key(r), np.nan) for r in rows])


def table(rows: list[Row], pred: np.ndarray, methods: list[str],
          before: np.ndarray | None = None) -> list[dict[str, Any]]:
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[group_of(r)].append(i)
    out = []
    for key, idx in sorted(groups.items()):
        meas = np.array([rows[i].measured_us for i in idx])
        err = (pred[idx] - meas) / meas * 100
        counts: dict[str, int] = defaultdict(int)
        for i in idx:
            counts[methods[i]] += 1
        out.append({"op": key[0], "phase": key[1], "precision": key[2], "layout": key[3], "rows": len(idx),
                    "mean_abs_pct": float(np.mean(np.abs(err))), "signed_pct": float(np.mean(err)),
                    "sum_pct": float((pred[idx].sum() / meas.sum() - 1) * 100),
                    "method": max(counts, key=counts.__getitem__)})
        if before is not None:
            was = (before[idx] - meas) / meas * 100
            out[-1]["before_mean_abs_pct"] = float(np.nanmean(np.abs(was))) if np.isfinite(was).any() else None
    return out


def print_table(groups: list[dict[str, Any]], gpu: str) -> None:
    before = any("before_mean_abs_pct" in g for g in groups)
    extra = " before: mean abs % |" if before else ""
    print(f"| op | phase | precision | layout | rows |{extra} mean abs % | signed % | summed % | method ({gpu}) |")
    print("|---|---|---|---|---|" + ("---|" if before else "") + "---|---|---|---|")
    for g in groups:
        was = g.get("before_mean_abs_pct")
        cell = (f" {was:.1f} |" if was is not None else " - |") if before else ""
        print(f"| {g['op']} | {g['phase']} | {g['precision']} | {g['layout'] or '-'} | {g['rows']} |{cell}"
              f" {g['mean_abs_pct']:.1f} | {g['signed_pct']:+.1f} | {g['sum_pct']:+.1f} | {g['method']} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a device-time kernel collection")
    p.add_argument("--gpu", default=DEFAULT_GPU, help="the collection's GPU (device database name)")
    p.add_argument("--json", type=Path, default=None, help="write the groups here")
    p.add_argument("--holdout", action="store_true", help="only the held-out shapes of the collection")
    p.add_argument("--ops", default=None, help="comma-separated OPNames (default: all)")
    p.add_argument("--rows", type=Path, default=None, help="write each row's measured and forecast time here")
    p.add_argument("--before", type=Path, default=None,
                   help="a --rows file of another build: its mean |error| on the same rows, per group")
    args = p.parse_args(argv)
    rows = read_rows(args.data)
    if args.ops:
        rows = [r for r in rows if r.op in set(args.ops.split(","))]
    if args.holdout:
        from habitat.data.engine import weights_dir

        rows = unseen(rows, Path(weights_dir()), args.data)
    if not rows:
        raise SystemExit(f"{args.data}: no rows of the families family_steps.py traces")
    t0 = time.perf_counter()
    templates = Templates()
    pred, methods = forecast(rows, args.gpu, templates)
    groups = table(rows, pred, methods, before_of(rows, args.before) if args.before else None)
    print_table(groups, args.gpu)
    print(f"\n{len(rows)} rows, {len(templates)} traced templates, {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(groups, indent=1) + "\n")
    if args.rows:
        args.rows.write_text(json.dumps([{"key": row_key(r), "measured_us": r.measured_us, "forecast_us": float(p)}
                                         for r, p in zip(rows, pred)]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
