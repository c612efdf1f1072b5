"""Choosing a GPU: every target ranked by the step as seen, with its cost per step, run time, run
cost and memory fit (the ranking and prices of :mod:`habitat.analysis.choice`)."""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

from habitat.analysis.choice import GpuChoice, cheapest, fastest, format_usd, step_choices, verdict
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
    # The step as the user sees it (host launch cadence and syncs included; timeline.h): what
    # the rank, the run time and the cost rest on. The kernel sum where there is no timeline.
    step_ms: float
    kernel_ms: float               # the sum of the step's kernels (device time), shown beside it
    run_seconds: float             # the whole run: iterations x the step as seen
    price: Price | None
    run_cost_usd: float | None     # None without a price
    memory_gb: float
    fits: bool | None              # None when the step's memory is unknown
    margin_bytes: int | None
    shape_based_ops: int           # leaf ops forecast from shapes alone (no measured kernel)
    ops: int
    # With a timeline: the GPU's busy fraction, and whether it waits for the host (then a
    # faster GPU does not make the step faster). None without one.
    gpu_busy_fraction: float | None = None
    host_bound: bool | None = None

    @property
    def iteration_ms(self) -> float:
        """The former name of :attr:`kernel_ms`."""
        return self.kernel_ms

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.price is None else self.price.usd_per_hour

    @property
    def usd_per_million_steps(self) -> float | None:
        return self.choice().usd_per_million_steps

    def choice(self) -> GpuChoice:
        return GpuChoice(self.gpu, self.step_ms, self.kernel_ms, self.host_bound,
                         self.usd_per_hour, self.fits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "gpu": self.gpu, "step_ms": self.step_ms,
            "kernel_sum_ms": self.kernel_ms, "host_bound": self.host_bound,
            "gpu_busy_fraction": self.gpu_busy_fraction, "usd_per_hour": self.usd_per_hour,
            "usd_per_1m_steps": self.usd_per_million_steps,
            "run_seconds": self.run_seconds, "run_cost_usd": self.run_cost_usd,
            "price_source": None if self.price is None else {
                "provider": self.price.provider, "sku": self.price.sku, "date": self.price.date,
                "source": self.price.source},
            "memory_gb": self.memory_gb, "fits": self.fits, "margin_bytes": self.margin_bytes,
            "shape_based_ops": self.shape_based_ops, "ops": self.ops,
        }


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds * 1000:.1f} ms"


class Comparison:
    """GPUs ranked by the step as seen (fastest first), with the kernel sum, cost per step,
    run time and cost, and memory fit."""

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

    def _row(self, choice: GpuChoice | None) -> ComparisonRow | None:
        return None if choice is None else next(r for r in self.rows if r.gpu == choice.gpu)

    @property
    def fastest(self) -> ComparisonRow:
        """The fastest step as seen among the GPUs the step fits on."""
        row = self._row(fastest([r.choice() for r in self.rows]))
        assert row is not None
        return row

    @property
    def cheapest(self) -> ComparisonRow | None:
        """The lowest cost per step (and so for the run) among priced GPUs the step fits on."""
        return self._row(cheapest([r.choice() for r in self.rows]))

    def verdict(self) -> str:
        """The answer in one line (:func:`habitat.analysis.choice.verdict`)."""
        return verdict([r.choice() for r in self.rows])

    @property
    def has_timeline(self) -> bool:
        return any(r.host_bound is not None for r in self.rows)

    @property
    def run_label(self) -> str:
        if self.epochs is not None:
            return f"{self.epochs:g} epoch(s) x {self.steps_per_epoch:,} steps = {self.iterations:,} iterations"
        return f"{self.iterations:,} iterations"

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict(),
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
        timeline = self.has_timeline
        header = ["#", "GPU", "step as seen (ms)", "kernels (ms)", "bound by", "$/hour",
                  "$/1M steps", f"{self.iterations:,} iterations", "run cost ($)", "memory"]
        if not timeline:
            header.remove("bound by")
        rows = [header]
        for r in self.rows:
            cost = r.usd_per_million_steps
            cells = [
                str(r.rank), r.gpu, f"{r.step_ms:.3f}", f"{r.kernel_ms:.3f}",
                "-" if r.host_bound is None else ("host" if r.host_bound else "device"),
                "n/a" if r.price is None else f"{r.price.usd_per_hour:.2f}",
                "n/a" if cost is None else format_usd(cost),
                format_duration(r.run_seconds),
                "n/a" if r.run_cost_usd is None else format_usd(r.run_cost_usd),
                _fit_text(r),
            ]
            if not timeline:
                del cells[4]
            rows.append(cells)
        return rows

    def __str__(self) -> str:
        cells = self.table_rows()
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        left = {1, len(cells[0]) - 1} | ({4} if self.has_timeline else set())
        lines = [self.verdict(),
                 f"GPU comparison: step {self.step_index} captured on {self.origin} "
                 f"(measured {self.measured_ms:.2f} ms); {self.run_label}; ranked by the step as seen"]
        for k, row in enumerate(cells):
            lines.append(("  " + "  ".join(c.ljust(w) if i in left else c.rjust(w)
                                           for i, (c, w) in enumerate(zip(row, widths)))).rstrip())
            if k == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        lines.extend("  " + note for note in self.notes())
        return "\n".join(lines)

    def notes(self) -> list[str]:
        out = []
        if self.dropped_ops:
            out.append(f"warning: the step ran {self.dropped_ops} ops more than the capture "
                       "recorded (max_ops_per_step): they are missing from every row")
        if self.has_timeline:
            out.append("step as seen: the host's launch cadence and its waits for the GPU "
                       "included; it sets the rank, the run time and the cost (kernels: the "
                       "sum of the step's kernel times alone)")
        else:
            out.append("no host timeline for this step: the step as seen is its kernel sum")
        if any(r.host_bound for r in self.rows):
            out.append("host-bound: the GPU waits for the host to launch work; fewer launches "
                       "(CUDA graphs, torch.compile, fused optimizers, larger batches) or a "
                       "faster host would shorten the step")
        if self.memory is not None:
            out.append(f"memory: {self.memory}")
            out.extend(f"memory note: {n}" for n in self.memory.notes)
        shape = [r.gpu for r in self.rows if r.shape_based_ops]
        if shape and len(shape) == len(self.rows):
            out.append("shape-based: ops without measured kernels were forecast from their shapes")
        out.append(f"prices: USD per GPU-hour on demand, {_price_origin(self.prices)}; "
                   "override with --prices FILE or HABITAT_PRICES")
        return out

    # ----- plot ----------------------------------------------------------------------
    def plot(self, path: str | Path) -> Path:
        """Draws the step as seen beside the kernel sum, and the cost of a million steps, per
        GPU; PNG, SVG or PDF by suffix."""
        path = Path(path)
        fmt = PLOT_FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise ValueError(f"cannot plot to {str(path)!r}: use a .png, .svg or .pdf file name")
        data = self.plot_bytes(fmt)
        return atomic_write_bytes(path, data)  # a crash or a full disk leaves the previous plot

    def plot_bytes(self, fmt: str = "png", *, row_in: float = 0.36) -> bytes:
        """The plot as bytes; `row_in`: inches of height per GPU (a report's first screen
        holds every GPU at 0.22)."""
        try:
            import matplotlib
        except ImportError:
            raise ImportError("plotting needs matplotlib: pip install matplotlib") from None
        matplotlib.use("Agg", force=False)
        from matplotlib.figure import Figure

        rows = list(reversed(self.rows))  # fastest at the top of a horizontal bar chart
        names = [r.gpu for r in rows]
        fits = [r.fits is not False for r in rows]
        fig = Figure(figsize=(11, max(2.6, row_in * len(rows) + 1.4)), layout="constrained")
        ax_time, ax_cost = fig.subplots(1, 2, sharey=True, width_ratios=(3, 2))
        y = range(len(rows))
        seen = ax_time.barh(y, [r.step_ms for r in rows], height=0.8, label="step as seen",
                            color=["tab:blue" if f else "tab:gray" for f in fits])
        ax_time.barh(y, [r.kernel_ms for r in rows], height=0.35, label="kernels alone",
                     color=["tab:orange" if f else "silver" for f in fits])
        for bar, r in zip(seen, rows):
            if r.fits is False:
                bar.set_hatch("//")
        ax_time.bar_label(seen, labels=[f"{r.step_ms:.3g}" + (" host-bound" if r.host_bound else "")
                                        for r in rows], padding=2, fontsize=8)
        ax_time.set_yticks(list(y), names)
        ax_time.set_xlabel("ms per step")
        ax_time.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=2, fontsize=8, frameon=False)
        costs = [r.usd_per_million_steps for r in rows]
        bars = ax_cost.barh(y, [c or 0.0 for c in costs],
                            color=["tab:green" if f else "tab:gray" for f in fits])
        ax_cost.bar_label(bars, labels=["no price" if c is None else f"${format_usd(c)}" for c in costs],
                          padding=2, fontsize=8)
        ax_cost.set_xlabel("USD per 1M steps (on-demand price x step as seen)")
        for ax in (ax_time, ax_cost):
            ax.margins(x=0.3)
            ax.grid(axis="x", alpha=0.3)
        title = f"Habitat: step {self.step_index} captured on {self.origin}, as each GPU would run it"
        if any(r.fits is False for r in rows):
            title += " (grey: does not fit in memory)"
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
    """Ranks `targets` ("all" known GPUs by default) by the step as seen of the latest
    detailed step, and prices each on it (:mod:`habitat.analysis.choice`).

    The run is `iterations` steps, or `epochs` x `steps_per_epoch`. Prices are the dated
    defaults overridden by ``HABITAT_PRICES``, then `price_file`, then `prices` ({gpu: USD/h}).
    """
    total = run_iterations(iterations, epochs, steps_per_epoch)
    table = price_table(prices, price_file)
    names = _target_names(targets)
    step = _detailed_step(forecast)
    if not set(names) <= set(step.targets):
        trace = cast("dict[str, Any]", step.trace)  # _detailed_step's step holds its trace
        step = Forecast.from_trace(trace_document(forecast.origin, [trace]), names,
                                   host_speed=forecast.host_speed).latest
    memory = step_memory(step)

    rows: list[ComparisonRow] = []
    for choice in step_choices(step, names, table.price_per_hour):
        name = choice.gpu
        seconds = choice.step_ms / 1000.0 * total
        price = table.get(name)
        fits, margin = memory.fits(name, reserve_bytes) if memory is not None else (None, None)
        methods = step.method_ops.get(name, {})
        timeline = step.timeline.get(name) if choice.host_bound is not None else None
        rows.append(ComparisonRow(
            rank=len(rows) + 1, gpu=name, step_ms=choice.step_ms, kernel_ms=choice.kernel_ms,
            run_seconds=seconds, price=price,
            run_cost_usd=None if price is None else price.usd_per_hour * seconds / 3600.0,
            memory_gb=get_device(name).memory_gb, fits=fits, margin_bytes=margin,
            shape_based_ops=sum(n for m, n in methods.items() if m in SHAPE_BASED_METHODS),
            ops=sum(methods.values()),
            gpu_busy_fraction=None if timeline is None else timeline["gpu_busy_fraction"],
            host_bound=choice.host_bound,
        ))
    return Comparison(rows, iterations=total, epochs=epochs,
                      steps_per_epoch=steps_per_epoch if epochs is not None else None,
                      step_index=step.index, origin=str(forecast.origin.get("device", "cpu")),
                      measured_ms=step.measured_ms, memory=memory, prices=table,
                      dropped_ops=getattr(step, "dropped_ops", 0))
