"""Harness-floor trials for the gemm and conv models: trains one candidate on NeuSight's rows plus
the H100 kernels' training problems less a model-selection split (habitat.learned.train_precision
.selection_split: 20 % of the training problems, seed 100, never the test problems) and prints
its mean % error on that split per precision and op (harness floor included). Only this figure
chooses between candidates; the held-out test figure is `python -m habitat.evaluate precision`
on the shipped weights, once per final candidate.

    python benchmarks/accuracy/floor_trials.py gemm --floor fitted --split --p 4 --out /tmp/w
    python benchmarks/accuracy/floor_trials.py conv --floor fitted --p 1 --members 3

--floor: "pooled" (one floor per op over all precisions, the estimate of before), "per-precision"
(one per op and precision, fixed at the smallest rows' median) or "fitted" (per op and precision,
fitted with the net). --split splits the fitted floor into an added and an overlapped part.
--p is the soft-maximum exponent of the measured rows (1: the floor adds to the kernel).
The candidates tried and their figures: weights/README.md "Fitted floors".
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from habitat.learned import fitting
from habitat.learned import train_precision as tp
from habitat.learned.devices import default_table
from habitat.learned.fitting import TrainConfig
from habitat.learned.neusight import OP_FAMILY, load_kernels, load_precision_kernels

REPO = Path(__file__).resolve().parents[2]
SELECTION_FRACTION = 0.2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("family", choices=("gemm", "conv"))
    p.add_argument("--data", default="../shared/data/neusight", help="NeuSight's data (kernels/ is read)")
    p.add_argument("--precision-data", default=str(REPO / "benchmarks/results/kernels/H100-SXM5-80GB"))
    p.add_argument("--floor", choices=("pooled", "per-precision", "fitted"), default="fitted")
    p.add_argument("--split", action="store_true", help="split the fitted floor (added + overlapped part)")
    p.add_argument("--p", type=float, default=None, help="harness exponent of the measured rows")
    p.add_argument("--members", type=int, default=1)
    p.add_argument("--hidden", default="64x64")
    p.add_argument("--share", type=float, default=None, help="share of each batch from the measured rows")
    p.add_argument("--out", type=Path, default=None, help="save the candidate's weights here")
    args = p.parse_args(argv)

    family = args.family
    if args.floor == "pooled":  # this process only: the keys of before (one floor per op)
        fitting.floor_key = lambda op, precision: op
    tp.FITTED_FLOOR_FAMILIES = (family,) if args.floor == "fitted" else ()
    tp.SPLIT_FLOOR_FAMILIES = (family,) if args.split else ()
    if args.p is not None:
        tp.MEASURED_SHARPNESS = {family: args.p}
    if args.share is not None:
        tp.MEASURED_SHARE = args.share
    cfg = dataclasses.replace(tp.MATRIX_CONFIG, clamp_inputs=family in tp.CLAMPED_FAMILIES, members=args.members,
                              hidden=tuple(int(v) for v in args.hidden.split("x")))
    neusight = load_kernels(args.data, "kernels", {op for op, f in OP_FAMILY.items() if f == family})
    measured = load_precision_kernels(args.precision_data)[family]
    t0 = time.time()
    model = tp.train_matrix_family(neusight.get(family), measured, default_table(), cfg, None,
                                   log=lambda text: None, select_fraction=SELECTION_FRACTION)
    selection = model.metadata["selection_error_pct"]
    print(json.dumps({"family": family, "candidate": vars(args) | {"out": str(args.out)},
                      "seconds": round(time.time() - t0),
                      "selection_mean_pct": {prec: {op: round(s["mean"], 2) for op, s in per.items()}
                                             for prec, per in selection.items()}}, indent=1))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        model.save(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
