"""What the launch-structure fits share (embedding_kernels_fit.py, loss_kernels_fit.py): the fit of
a model's constants by the mean squared log error, and the printout of its errors on a set of rows
(each row has `gpu` and `us`, the measured device time)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy.optimize import minimize

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
