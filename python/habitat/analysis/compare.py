"""Choosing a GPU: every target ranked by predicted iteration time, run time, cost and memory fit."""
from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from habitat.analysis.memory import DEFAULT_RESERVE_BYTES, MemoryEstimate, format_bytes, step_memory
from habitat.analysis.pricing import Price, PriceTable, price_table
from habitat.data.devices import get_device, target_names
from habitat.data.engine import trace_document
from habitat.data.files import atomic_write_bytes
from habitat.data.forecast import SHAPE_BASED_METHODS, Forecast, StepForecast

PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


@dataclass(frozen=True)
class ComparisonRow:
    rank: int
    gpu: str
    iteration_ms: float
    run_seconds: float             # the whole run: iterations x iteration time
    price: Price | None
    run_cost_usd: float | None     # None without a price
    memory_gb: float
    fits: bool | None              # None when the step's memory is unknown
    margin_bytes: int | None
    shape_based_ops: int           # leaf ops forecast from shapes alone (no measured kernel)
    ops: int
    # The step as the user sees it (host launch cadence and syncs included; timeline.h), when
    # the forecast has a timeline: its time, the GPU's busy fraction, and whether the GPU
    # waits for the host (then a faster GPU does not make the step faster).
    step_ms: float | None = None
    gpu_busy_fraction: float | None = None
    host_bound: bool | None = None

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.price is None else self.price.usd_per_hour

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "gpu": self.gpu, "iteration_ms": self.iteration_ms,
            "run_seconds": self.run_seconds, "usd_per_hour": self.usd_per_hour,
            "run_cost_usd": self.run_cost_usd,
            "price_source": None if self.price is None else {
                "provider": self.price.provider, "sku": self.price.sku, "date": self.price.date,
                "source": self.price.source},
            "memory_gb": self.memory_gb, "fits": self.fits, "margin_bytes": self.margin_bytes,
            "shape_based_ops": self.shape_based_ops, "ops": self.ops,
            "step_ms": self.step_ms, "gpu_busy_fraction": self.gpu_busy_fraction,
            "host_bound": self.host_bound,
        }


def format_usd(x: float) -> str:
    """Dollars with cents; below a cent, two significant digits (0.00062), never 1e-04."""
    if abs(x) >= 0.01 or x == 0:
        return f"{x:,.2f}"
    return f"{x:.{1 - math.floor(math.log10(abs(x)))}f}"


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds * 1000:.1f} ms"


class Comparison:
    """GPUs ranked by predicted iteration time (fastest first), with run time, cost and memory."""

    def __init__(self, rows: list[ComparisonRow], *, iterations: int, epochs: float | None,
                 steps_per_epoch: int | None, step_index: int, origin: str, measured_ms: float,
                 memory: MemoryEstimate | None, prices: PriceTable, dropped_ops: int = 0) -> None:
        self.rows = rows
        self.dropped_ops = dropped_ops  # ops the capture did not record: missing from every row
        self.iterations = iterations
        self.epochs = epochs
        self.steps_per_epoch = steps_per_epoch
        self.step_index = step_index
        self.origin = origin
        self.measured_ms = measured_ms
        self.memory = memory
        self.prices = prices

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, gpu: str) -> ComparisonRow:
        name = get_device(gpu).name
        for row in self.rows:
            if row.gpu == name:
                return row
        raise KeyError(f"{gpu!r} is not in this comparison; GPUs: {', '.join(r.gpu for r in self.rows)}")

    @property
    def fastest(self) -> ComparisonRow:
        fitting = [r for r in self.rows if r.fits is not False]
        return (fitting or self.rows)[0]

    @property
    def cheapest(self) -> ComparisonRow | None:
        """The lowest run cost among priced GPUs the step fits on."""
        priced = [r for r in self.rows if r.run_cost_usd is not None and r.fits is not False]
        return min(priced, key=lambda r: r.run_cost_usd or 0.0) if priced else None

    @property
    def run_label(self) -> str:
        if self.epochs is not None:
            return f"{self.epochs:g} epoch(s) x {self.steps_per_epoch:,} steps = {self.iterations:,} iterations"
        return f"{self.iterations:,} iterations"

    def to_dict(self) -> dict[str, Any]:
        return {
            "iterations": self.iterations, "epochs": self.epochs,
            "steps_per_epoch": self.steps_per_epoch, "step": self.step_index,
            "origin": self.origin, "measured_ms": self.measured_ms,
            "prices": {"date": self.prices.date, "rule": self.prices.rule},
            "memory": None if self.memory is None else self.memory.to_dict(),
            "rows": [r.to_dict() for r in self.rows],
            **({"dropped_ops": self.dropped_ops} if self.dropped_ops else {}),
        }

    # ----- text ----------------------------------------------------------------------
    def table_rows(self) -> list[list[str]]:
        """Header plus one row of cells per GPU (shared by the text, Markdown and HTML tables)."""
        timeline = any(r.step_ms is not None for r in self.rows)
        rows = [["#", "GPU", "iteration (ms)", f"{self.iterations:,} iterations", "$/GPU-hour",
                 "run cost (USD)", "memory"]]
        if timeline:
            rows[0][3:3] = ["step as seen (ms)", "bound by"]
        for r in self.rows:
            cells = [
                str(r.rank), r.gpu, f"{r.iteration_ms:.3f}", format_duration(r.run_seconds),
                "n/a" if r.price is None else f"{r.price.usd_per_hour:.2f}",
                "n/a" if r.run_cost_usd is None else format_usd(r.run_cost_usd),
                _fit_text(r),
            ]
            if timeline:
                cells[3:3] = ["-" if r.step_ms is None else f"{r.step_ms:.3f}",
                              "-" if r.host_bound is None else ("host" if r.host_bound else "device")]
            rows.append(cells)
        return rows

    def __str__(self) -> str:
        cells = self.table_rows()
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        lines = [f"GPU comparison: step {self.step_index} captured on {self.origin} "
                 f"(measured {self.measured_ms:.2f} ms); {self.run_label}"]
        for k, row in enumerate(cells):
            left = (1, len(row) - 1) + ((4,) if len(row) > 7 else ())
            lines.append(("  " + "  ".join(c.ljust(w) if i in left else c.rjust(w)
                                           for i, (c, w) in enumerate(zip(row, widths)))).rstrip())
            if k == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        lines.extend("  " + note for note in self.notes())
        return "\n".join(lines)

    def notes(self) -> list[str]:
        out = [f"fastest: {self.fastest.gpu}"]
        if self.dropped_ops:
            out.insert(0, f"warning: the step ran {self.dropped_ops} ops more than the capture "
                          "recorded (max_ops_per_step): they are missing from every row")
        cheapest = self.cheapest
        if cheapest is not None:
            out[0] += f"; cheapest for the run: {cheapest.gpu} (${format_usd(cheapest.run_cost_usd or 0.0)})"
        if self.memory is not None:
            out.append(f"memory: {self.memory}")
            out.extend(f"memory note: {n}" for n in self.memory.notes)
        seen = [r for r in self.rows if r.step_ms is not None]
        if seen:
            best = min(seen, key=lambda r: r.step_ms or 0.0)
            same = [r.gpu for r in seen if (r.step_ms or 0.0) <= 1.02 * (best.step_ms or 0.0)]
            out.append(f"fastest as seen (host launch cadence included): {best.gpu} ({best.step_ms:.3f} ms)"
                       + (f"; within 2% of it: {', '.join(g for g in same if g != best.gpu)}"
                          if len(same) > 1 else "")
                       + "; the ranking, run time and cost above use the kernel sum (iteration)")
        bound = [r.gpu for r in self.rows if r.host_bound]
        if bound:
            out.append(f"host-bound on {', '.join(bound)}: the GPU waits for the host to launch work, "
                       "so a faster GPU will not shorten the step (see 'step as seen'); CUDA graphs, "
                       "torch.compile or a faster host would")
        shape = [r.gpu for r in self.rows if r.shape_based_ops]
        if shape and len(shape) == len(self.rows):
            out.append("shape-based: ops without measured kernels were forecast from their shapes")
        out.append(f"prices: USD per GPU-hour on demand, {_price_origin(self.prices)}; "
                   "override with --prices FILE or HABITAT_PRICES")
        return out

    # ----- plot ----------------------------------------------------------------------
    def plot(self, path: str | Path) -> Path:
        """Draws predicted iteration time and run cost per GPU; PNG, SVG or PDF by suffix."""
        path = Path(path)
        fmt = PLOT_FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise ValueError(f"cannot plot to {str(path)!r}: use a .png, .svg or .pdf file name")
        data = self.plot_bytes(fmt)
        return atomic_write_bytes(path, data)  # a crash or a full disk leaves the previous plot

    def plot_bytes(self, fmt: str = "png") -> bytes:
        try:
            import matplotlib
        except ImportError:
            raise ImportError("plotting needs matplotlib: pip install matplotlib") from None
        matplotlib.use("Agg", force=False)
        from matplotlib.figure import Figure

        rows = list(reversed(self.rows))  # fastest at the top of a horizontal bar chart
        names = [r.gpu for r in rows]
        colors = ["tab:blue" if r.fits is not False else "tab:gray" for r in rows]
        fig = Figure(figsize=(11, max(3.0, 0.38 * len(rows) + 1.6)), layout="constrained")
        ax_time, ax_cost = fig.subplots(1, 2, sharey=True)
        bars = ax_time.barh(names, [r.iteration_ms for r in rows], color=colors)
        for bar, r in zip(bars, rows):
            if r.fits is False:
                bar.set_hatch("//")
        ax_time.set_xlabel("predicted iteration time (ms)")
        ax_time.bar_label(bars, fmt="%.3g", padding=2, fontsize=8)
        costs = [r.run_cost_usd or 0.0 for r in rows]
        bars = ax_cost.barh(names, costs, color=["tab:green" if r.fits is not False else "tab:gray"
                                                 for r in rows])
        ax_cost.bar_label(bars, labels=["no price" if r.run_cost_usd is None else f"${format_usd(r.run_cost_usd)}"
                                        for r in rows], padding=2, fontsize=8)
        ax_cost.set_xlabel(f"cost of {self.iterations:,} iterations (USD, on-demand)")
        for ax in (ax_time, ax_cost):
            ax.margins(x=0.25)
            ax.grid(axis="x", alpha=0.3)
        title = f"Habitat: step {self.step_index} captured on {self.origin}; {self.run_label}"
        if any(r.fits is False for r in rows):
            title += " (hatched/grey: step does not fit in memory)"
        fig.suptitle(title, fontsize=10)
        buffer = io.BytesIO()
        with matplotlib.rc_context({"svg.fonttype": "none"}):  # SVG text stays searchable text
            fig.savefig(buffer, format=fmt, dpi=110)
        return buffer.getvalue()


def _fit_text(r: ComparisonRow) -> str:
    if r.fits is None or r.margin_bytes is None:
        return f"{r.memory_gb:g} GiB"
    if r.fits:
        return f"fits ({format_bytes(r.margin_bytes)} spare of {r.memory_gb:g} GiB)"
    return f"DOES NOT FIT ({format_bytes(-r.margin_bytes)} short of {r.memory_gb:g} GiB)"


def _price_origin(prices: PriceTable) -> str:
    if prices.date and prices.date != "user":
        return f"dated defaults compiled {prices.date} (lower median of providers' offers)"
    return "user prices"


def _target_names(targets: str | Sequence[str]) -> list[str]:
    # "all", a name, "a,b" or a list; None, 5, [] get the unknown-GPU advice.
    return target_names(targets, what="compare(targets=...)")


def _detailed_step(forecast: "Forecast") -> "StepForecast":
    for step in reversed(forecast.steps):
        if step.holds_trace:  # without decoding it
            return step
    raise RuntimeError("compare needs a step whose ops are still held: run a step inside "
                       "`with habitat.predict_on(...)` or load a saved trace")


def _timeline_cells(step: "StepForecast", target: str) -> dict[str, Any]:
    t = step.timeline.get(target) if hasattr(step, "timeline") else None
    if not t or not t.get("valid"):
        return {}
    return {"step_ms": t["step_ms"], "gpu_busy_fraction": t["gpu_busy_fraction"],
            "host_bound": bool(t["host_bound"])}


def run_iterations(iterations: int | None, epochs: float | None, steps_per_epoch: int | None) -> int:
    if epochs is not None:
        if not steps_per_epoch or steps_per_epoch <= 0:
            raise ValueError("epochs needs steps_per_epoch (the number of steps in one epoch)")
        if epochs <= 0:
            raise ValueError(f"epochs must be > 0, got {epochs}")
        return max(1, round(epochs * steps_per_epoch))
    if iterations is None or iterations <= 0:
        raise ValueError(f"iterations must be > 0, got {iterations}")
    return int(iterations)


def compare(forecast: "Forecast", targets: str | Sequence[str] = "all", *, iterations: int = 1000,
            epochs: float | None = None, steps_per_epoch: int | None = None,
            prices: "PriceTable | Mapping[str, Any] | None" = None,
            price_file: str | Path | None = None,
            reserve_bytes: int = DEFAULT_RESERVE_BYTES) -> Comparison:
    """Ranks `targets` ("all" known GPUs by default) by the predicted time of the latest step.

    The run is `iterations` steps, or `epochs` x `steps_per_epoch`. Prices are the dated
    defaults overridden by ``HABITAT_PRICES``, then `price_file`, then `prices` ({gpu: USD/h}).
    """
    total = run_iterations(iterations, epochs, steps_per_epoch)
    table = price_table(prices, price_file)
    names = _target_names(targets)
    step = _detailed_step(forecast)
    if not set(names) <= set(step.targets):
        step = Forecast.from_trace(trace_document(forecast.origin, [step.trace]), names).latest
    memory = step_memory(step)

    rows = []
    for name in sorted(names, key=lambda n: step.total_ms[n]):
        ms = step.total_ms[name]
        seconds = ms / 1000.0 * total
        price = table.get(name)
        fits, margin = memory.fits(name, reserve_bytes) if memory is not None else (None, None)
        methods = step.method_ops.get(name, {})
        rows.append(ComparisonRow(
            rank=len(rows) + 1, gpu=name, iteration_ms=ms, run_seconds=seconds, price=price,
            run_cost_usd=None if price is None else price.usd_per_hour * seconds / 3600.0,
            memory_gb=get_device(name).memory_gb, fits=fits, margin_bytes=margin,
            shape_based_ops=sum(n for m, n in methods.items() if m in SHAPE_BASED_METHODS),
            ops=sum(methods.values()),
            **_timeline_cells(step, name),
        ))
    return Comparison(rows, iterations=total, epochs=epochs,
                      steps_per_epoch=steps_per_epoch if epochs is not None else None,
                      step_index=step.index, origin=str(forecast.origin.get("device", "cpu")),
                      measured_ms=step.measured_ms, memory=memory, prices=table,
                      dropped_ops=getattr(step, "dropped_ops", 0))
