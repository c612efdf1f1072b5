"""K-fold leave-shapes-out accuracy of one learned family on the H100 device-time collection.

    python benchmarks/accuracy/kfold.py FAMILY [--folds 5] [--data NEUSIGHT] [--json OUT]

The shipped split holds out a fifth of the collection's problems once; for the families with
few problems (27 convolution shapes, 10 attention shapes) that is a handful of test rows and the
figure moves by several points from one split to another. Here the problems are split into
--folds folds (numpy.random.default_rng(SEED)); for each fold a model is trained as
`python -m habitat.learned.train` trained the shipped one (the collections, shares and members
of its JSON's `training_command`, train.FAMILY_NETS' net; no leave-one-GPU-out models) with
that fold held out of every source, and forecasts the fold's rows as the engine would
(habitat.evaluate.precision.forecast). Every problem is then scored once by a model that never
saw it. Prints mean / median absolute % error and the signed
mean per precision, op and layout or backend. Nothing is tuned on it.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SEED = 7


def shipped_args(family: str) -> argparse.Namespace:
    """The arguments the shipped model of `family` was trained with (weights/<family>.json,
    training_command), read by the trainer's own parser."""
    from habitat.learned import train as tr

    argv = shlex.split(json.loads((REPO / "weights" / f"{family}.json").read_text())["training_command"])
    args = tr.parser().parse_args(argv[argv.index("habitat.learned.train") + 1:])
    if not any(args.collections.split(",")):
        raise SystemExit(f"weights/{family}.json was trained on no collection: nothing to fold")
    return args


def main(argv: list[str] | None = None) -> int:
    from habitat.evaluate import precision as ev
    from habitat.learned import train as tr
    from habitat.learned.devices import default_table
    from habitat.learned.fitting import TrainConfig, ape, summary
    from habitat.learned.neusight import KernelTable

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("family", choices=ev.FAMILIES)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--data", default=None, help="NeuSight data directory (its kernels/ train too, as shipped)")
    p.add_argument("--traces", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--json", default=None)
    p.add_argument("--rows", default=None, help="write every row's forecast and measurement here (CSV)")
    args = p.parse_args(argv)
    devices = default_table()
    shipped = shipped_args(args.family)
    if shipped.shares:
        tr.apply_shares(shipped.shares)
    collections = [REPO / c for c in shipped.collections.split(",") if c]
    ns = argparse.Namespace(collections=[str(c) for c in collections], traces=args.traces, data=args.data,
                            runs=shipped.runs, exclude_workloads=shipped.exclude_workloads)
    sources = tr.family_sources(args.family, ns, devices)
    rows = ev.read_rows(collections[0], args.family)
    table = KernelTable(args.family)
    for r in rows:
        table.add(r["op"].split(":")[0], r["device"], r["us"], 0.0, r["shape"], 0, r["precision"])
    keys = table.arrays().problem_keys()
    folds = np.array_split(np.random.default_rng(SEED).permutation(np.unique(keys)), args.folds)
    pred = np.zeros(len(rows))
    cfg = TrainConfig(**tr.FAMILY_NETS.get(args.family, {}), members=shipped.members,
                      clamp_inputs=args.family in tr.CLAMPED_FAMILIES)
    for i, fold in enumerate(folds):
        model = tr.train_family(args.family, sources, devices, cfg, held_out=fold, log=lambda *_: None)
        mine = np.isin(keys, fold)
        pred[mine] = ev.forecast(model, [r for r, m in zip(rows, mine) if m], devices)
        print(f"fold {i + 1}/{args.folds}: {int(mine.sum())} rows", flush=True)
    meas = np.array([r["us"] for r in rows])
    err = ape(pred, meas)
    out: dict = {}
    print(f"\n{args.family}: {args.folds}-fold leave-shapes-out on {collections[0].name} (every problem held out once)")
    print(f"{'precision':9s} {'op (layout)':28s} | {'n':>5s} {'mean':>7s} {'median':>7s} {'signed':>7s}")
    for prec in sorted({r["precision"] for r in rows}):
        for g in sorted({ev._group(r) for r in rows if r["precision"] == prec}):
            sel = np.array([r["precision"] == prec and ev._group(r) == g for r in rows])
            s = summary(err[sel])
            s["signed_mean"] = float(np.mean((pred[sel] - meas[sel]) / meas[sel]) * 100)
            out.setdefault(prec, {})[g] = s
            print(f"{prec:9s} {g:28s} | {s['n']:5d} {s['mean']:7.1f} {s['median']:7.1f} {s['signed_mean']:+7.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    if args.rows:
        import csv
        with open(args.rows, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["precision", "op", "layout"] + list(rows[0]["shape"]) + ["measured_us", "forecast_us"])
            for r, f_us in zip(rows, pred):
                w.writerow([r["precision"], r["op"], r["layout"]] + list(r["shape"].values()) + [r["us"], f_us])
    return 0


if __name__ == "__main__":
    sys.exit(main())
