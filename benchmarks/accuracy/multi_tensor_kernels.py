"""Per step on the multi-tensor kernel rows (AdamW, and the multitensor family's SGD, GradScaler
unscale and gradient clipping where a collection has them): each row's step traced on the CPU as
a user's would record it, forecast by the engine for the collection's GPU with the installed
weights, against the kernels measured (`Kernel Latency`).

    python benchmarks/accuracy/multi_tensor_kernels.py [--json OUT]

multi_tensor_fit.py fits the launch model's constants on the same rows from its own account of
the launches; this scores the engine itself (its launch splitting, its bytes per op, the CUDA
path a CPU trace of the optimizer is mapped to). A row's parameter list is redrawn from the
collector's seed (multi_tensor_fit.parameter_lists); the collector's own case runs on the CPU at
a template list of distinct primes, one per tensor, and each prime is then rewritten as its
tensor's size (family_steps.resized). Per group (GPU, op, implementation, precision): rows, mean
|error| %, signed mean %, and the same over the H100's held-out fifth (habitat.learned.
family_table.held_out), which no constant saw.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import multi_tensor_fit as fit  # noqa: E402  (also puts the collector's modules on the path)
from family_steps import resized  # noqa: E402

from habitat.learned.family_table import held_out  # noqa: E402

# (GPU in the device database, collection, its name in multi_tensor_fit.SEEDS)
COLLECTIONS = (("H100-SXM5-80GB", fit.H100, "H100"), ("H200-SXM-141GB", fit.H200, "H200"))
STEMS = ("adamw", "multitensor")  # the CSV stems, each its collector family's name
PRECISIONS = ("fp32", "bf16")


def primes(n: int, start: int = 11) -> list[int]:
    """The first n primes from `start`: a template list's sizes, one per tensor."""
    out: list[int] = []
    k = start
    while len(out) < n:
        if all(k % p for p in range(2, int(k ** 0.5) + 1)):
            out.append(k)
        k += 1
    return out


def read_rows(directory: Path, name: str) -> list[dict[str, Any]]:
    rows = []
    for stem in STEMS:
        drawn = fit.parameter_lists(name, stem)
        for precision in PRECISIONS:
            path = directory / f"{stem}_{precision}.csv"
            if not path.is_file():
                continue
            with path.open(newline="") as f:
                for r in csv.DictReader(f):
                    shape = {c: int(r[c]) for c in fit.LIST_COLUMNS}
                    rows.append({"stem": stem, "op": r["OPName"], "impl": r["Impl"], "precision": precision,
                                 "sizes": fit.list_of(drawn, r, path), "us": float(r["Kernel Latency"]) * 1e3,
                                 "held": held_out(stem, shape)})
    return rows


def _case(row: dict[str, Any], sizes: list[int]):
    import cases_training

    shape = {"Tensors": len(sizes), "Elements": sum(sizes), "Largest": max(sizes), "Chunks": len(sizes),
             "sizes": tuple(sizes)}
    make = cases_training.adamw_cases if row["stem"] == "adamw" else cases_training.multitensor_cases
    for case in make([shape], "cpu"):
        if (case.op, case.precision, case.shape["Impl"]) == (row["op"], row["precision"], row["impl"]):
            return case.run
    raise KeyError(f"no collector case for {row['op']} {row['impl']} {row['precision']}")


class Templates:
    """One CPU trace per (op, implementation, precision, tensor count), at prime sizes."""

    def __init__(self) -> None:
        self._traced: dict[tuple, list[dict[str, Any]]] = {}

    def step_ops(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        from habitat.capture.record import record_step

        n = len(row["sizes"])
        key = (row["stem"], row["op"], row["impl"], row["precision"], n)
        if key not in self._traced:
            run = _case(row, primes(n))
            with record_step(0) as rec:
                run()
            self._traced[key] = rec.step["ops"]
        return resized(self._traced[key], dict(zip(primes(n), row["sizes"])))


def forecast_steps(steps_ops: list[list[dict[str, Any]]], gpu: str) -> np.ndarray:
    """Each CPU-traced step's forecast kernel time on `gpu` (us): its summed op shares."""
    from habitat.capture.environment import trace_origin
    from habitat.data import engine

    steps = [{"index": k, "wall_ms": 1.0, "ops": ops} for k, ops in enumerate(steps_ops)]
    _, forecasts = engine.forecast_trace(engine.trace_document(trace_origin("cpu"), steps), [gpu])
    return np.array([float(op_rows.array["share_us"][:, 0].sum()) for *_, op_rows in forecasts])


def forecast(rows: list[dict[str, Any]], gpu: str, templates: Templates) -> np.ndarray:
    """Each row's forecast kernel time on `gpu` (us)."""
    return forecast_steps([templates.step_ops(r) for r in rows], gpu)


def table(rows: list[dict[str, Any]], pred: np.ndarray, gpu: str) -> list[dict[str, Any]]:
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[(r["op"], r["impl"], r["precision"])].append(i)
    out = []
    for (op, impl, precision), idx in sorted(groups.items()):
        err = (pred[idx] - np.array([rows[i]["us"] for i in idx])) / np.array([rows[i]["us"] for i in idx]) * 100
        held = np.array([rows[i]["held"] for i in idx])
        out.append({"gpu": gpu, "op": op, "impl": impl, "precision": precision, "rows": len(idx),
                    "mean_abs": float(np.abs(err).mean()), "signed": float(err.mean()),
                    "held_rows": int(held.sum()),
                    "held_mean_abs": float(np.abs(err[held]).mean()) if held.any() else None})
    return out


def print_table(groups: list[dict[str, Any]]) -> None:
    print("| GPU | op | impl | precision | rows | mean abs % | signed % | held-out fifth: rows, mean abs % |")
    print("|---|---|---|---|---|---|---|---|")
    for g in groups:
        held = f"{g['held_rows']}, {g['held_mean_abs']:.1f}" if g["held_mean_abs"] is not None else "-"
        print(f"| {g['gpu']} | {g['op']} | {g['impl']} | {g['precision']} | {g['rows']} | {g['mean_abs']:.1f} | "
              f"{g['signed']:+.1f} | {held} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", type=Path, default=None, help="write the groups here")
    args = p.parse_args(argv)
    templates, groups = Templates(), []
    for gpu, directory, name in COLLECTIONS:
        rows = read_rows(directory, name)
        if name != "H100":  # only the H100's fifth is held out of the fit; every H200 row is
            for r in rows:
                r["held"] = True
        groups += table(rows, forecast(rows, gpu, templates), gpu)
    print_table(groups)
    if args.json:
        args.json.write_text(json.dumps(groups, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
