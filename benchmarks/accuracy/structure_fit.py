"""What the launch-structure fits share (embedding_kernels_fit.py, loss_kernels_fit.py): reading a
collection's rows, the fit of a model's constants by the mean squared log error, and the printout
of its errors (each row has `gpu` and `us`, the measured device time)."""
from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from habitat.learned.devices import default_table  # noqa: E402

Model = Callable[[dict[str, float], Any, Any], float]  # (constants, row, device) -> us


def fit(names: tuple[str, ...], start: list[float], model: Model, rows: list[Any], devices: dict[str, Any]) \
        -> dict[str, float]:
    """The constants named `names` (all positive) that minimise the mean squared log error of
    `model` over `rows`, by Nelder-Mead from `start` (scipy), restarted once from its optimum."""
    y = np.log([r.us for r in rows])

    def loss(p: np.ndarray) -> float:
        c = dict(zip(names, np.exp(p)))
        return float(np.mean((np.log([model(c, r, devices[r.gpu]) for r in rows]) - y) ** 2))

    p = np.log(start)
    for _ in range(2):
        p = minimize(loss, p, method="Nelder-Mead", options={"maxiter": 8000, "xatol": 1e-5, "fatol": 1e-9}).x
    return dict(zip(names, np.exp(p)))


def errors(model: Model, c: dict[str, float], rows: list[Any], devices: dict[str, Any]) -> str:
    """Mean, median and p90 |error| per row, the signed mean and the summed time's error."""
    if not rows:
        return "no rows"
    pred = np.array([model(c, r, devices[r.gpu]) for r in rows])
    meas = np.array([r.us for r in rows])
    e = (pred - meas) / meas * 100
    return f"{len(rows):4d} rows  mean |error| {np.abs(e).mean():5.1f}%  median {np.median(np.abs(e)):5.1f}%  " \
           f"p90 {np.percentile(np.abs(e), 90):5.1f}%  signed {e.mean():+5.1f}%  summed time {(pred.sum() / meas.sum() - 1) * 100:+5.1f}%"


def collection_rows(directory: Path, stem: str) -> Iterator[tuple[int, dict[str, str]]]:
    """(element bytes, CSV row) of a collection's fp32 and bf16 files of `stem`."""
    for precision, elem in (("fp32", 4), ("bf16", 2)):
        with open(directory / f"{stem}_{precision}.csv") as f:
            for r in csv.DictReader(f):
                yield elem, r


@dataclass
class Phase:
    """One pass's model: its constants' names and starting values, the model, and what its rows
    are grouped by in the printout."""
    name: str
    constants: tuple[str, ...]
    start: list[float]
    model: Model
    group: Callable[[Any], str]


def run(doc: str, argv: list[str] | None, h100: Path, h200: Path, load: Callable[[Path, str], list[Any]],
        phases: list[Phase], fitted: dict[str, dict[str, float]] | None = None) -> int:
    """The fit scripts' command line: each phase fitted on the H100's rows outside the held-out
    fifth (rows have `gpu`, `phase`, `held`), and its errors printed on those rows, on the
    held-out fifth and on the H200's rows, each also per group. Phases are fitted in turn, each
    one's constants stored in `fitted` under its name, where a later phase's model may read
    them."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--h100", type=Path, default=h100)
    ap.add_argument("--h200", type=Path, default=h200)
    args = ap.parse_args(argv)
    table = default_table()
    devices = {"H100": table.find("H100-SXM5-80GB"), "H200": table.find("H200-SXM-141GB")}
    rows = load(args.h100, "H100") + load(args.h200, "H200")
    for phase in phases:
        mine = [r for r in rows if r.phase == phase.name]
        c = fit(phase.constants, phase.start, phase.model, [r for r in mine if r.gpu == "H100" and not r.held],
                devices)
        if fitted is not None:
            fitted[phase.name] = c
        print(f"== {phase.name}: constants")
        for k, v in c.items():
            print(f"  {k:28s} {v:10.3f}")
        for gpu, held, label in (("H100", False, "H100 fitted rows"), ("H100", True, "H100 held-out fifth"),
                                 ("H200", None, "H200 (not fitted)")):
            sel = [r for r in mine if r.gpu == gpu and (held is None or r.held == held)]
            print(f"  {label:20s} {errors(phase.model, c, sel, devices)}")
            for g in sorted({phase.group(r) for r in sel}):
                print(f"    {g:18s} {errors(phase.model, c, [r for r in sel if phase.group(r) == g], devices)}")
    return 0
