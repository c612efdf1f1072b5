"""The readable text printed by ``print(forecast)``: the verdict first (fastest as seen,
cheapest, host-bound; :mod:`habitat.analysis.choice`), then the targets ranked by the step as
seen, its kernel sum and phases, their prices, and the step's top ops."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from habitat.analysis.choice import GpuChoice, format_usd, step_choices, verdict
from habitat.analysis.regions import REGION_PREFIX, format_regions
from habitat.present import timeline_view, view
from habitat.present.escape import terminal_text

if TYPE_CHECKING:
    from habitat.data.forecast import Forecast
    from habitat.data.step_forecast import StepForecast

TOP_OPS = 10


def _row(label: str, cells: list[str], width: int) -> str:
    return f"  {label:<22}" + "".join(f"{c:>{width}}" for c in cells)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Rows of cells as columns as wide as their widest cell (nothing truncated)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [("  " + "  ".join(c.rjust(w) if i in right else c.ljust(w)
                              for i, (c, w) in enumerate(zip(row, widths)))).rstrip()
            for row in rows]


def _step_counts(forecast: "Forecast") -> list[str]:
    """How many steps predict_on recorded in detail, reused or skipped (nothing when every step
    was recorded in detail)."""
    counts = getattr(forecast, "step_counts", None)  # set by predict_on
    if not (counts and (counts.get("reused") or counts.get("skipped"))):
        return []
    return [f"Steps: {counts['detailed']} recorded in detail, {counts['reused']} reused the "
            f"forecast of an identical step (each with its own measured time), "
            f"{counts['skipped']} skipped (the forecast thread was behind)"
            + (f", {counts['coalesced']} of the reused only in the step history and TensorBoard's "
               "scalars (TensorBoard's per-op detail, forecast.json and callbacks are held "
               "to a small share of the training time)"
               if counts.get("coalesced") else "")]


def _header(forecast: "Forecast", step: "StepForecast", choices: list[GpuChoice], warnings: list[str]) -> list[str]:
    """The verdict (unless the step has warnings), the step measured, its warnings and notes."""
    origin = forecast.origin.get("device", "cpu")
    lines = [] if warnings else [verdict(choices)]
    lines.append(f"Habitat forecast: step {step.index} (measured {step.measured_ms:.2f} ms on {origin}; "
                 f"{len(forecast.steps)} step(s) so far)")
    lines.extend(warnings)
    lines.extend(_step_counts(forecast))
    note = forecast.detail_note() if hasattr(forecast, "detail_note") else None
    if note:
        lines.append("Note: " + note)
    return lines


def _target_table(step: "StepForecast", choices: list[GpuChoice], targets: list[str], width: int,
                  priced: bool) -> list[str]:
    """One column per target, fastest first: the step as seen, its kernels and phases, and
    (`priced`) the price per hour and per million steps."""
    lines = [_row("", targets, width)]
    seen = timeline_view.rows(step, targets)  # the step as seen, GPU busy, bound by, ...
    if not seen:  # no timeline: the step as seen is the kernel sum
        seen = [("step as seen (ms)", [f"{c.step_ms:.3f}" for c in choices])]
    for label, cells in seen:
        lines.append(_row(label, cells, width))
    lines.append(_row("kernels (ms)", [f"{c.kernel_ms:.3f}" for c in choices], width))
    for phase, values in view.phase_rows(step, targets):
        lines.append(_row(f"  {phase}", [f"{v:.3f}" for v in values], width))
    if priced and any(c.usd_per_hour is not None for c in choices):
        lines.append(_row("$ per hour", ["n/a" if c.usd_per_hour is None else f"{c.usd_per_hour:.2f}"
                                         for c in choices], width))
        lines.append(_row("$ per 1M steps", ["n/a" if c.usd_per_million_steps is None
                                             else format_usd(c.usd_per_million_steps)
                                             for c in choices], width))
    return lines


def _methods(step: "StepForecast", target: str) -> list[str]:
    """How many of the step's ops on `target` each forecast method gave, and what each means."""
    methods = step.method_ops[target]
    if not methods:
        return []
    return [f"Methods on {target} (ops counted in its total, by forecast method): "
            + view.method_counts(step, target),
            *(f"  {m}: {meaning}" for m, meaning in view.method_legend(list(methods)))]


def _top_ops_and_regions(step: "StepForecast", target: str) -> list[str]:
    """The step's top ops on `target` and its compiled regions."""
    # A step the engine holds, not decoded yet: the printed ops are decoded alone (a step of
    # 90k ops decoded whole took seconds), and its compiled regions are looked for only when
    # its text names one.
    text = step.text_view() if hasattr(step, "text_view") else None
    top = text.top_ops(target, TOP_OPS) if text is not None else None
    if top is None:
        top = view.top_ops(step, target, TOP_OPS)
    lines = []
    if top:
        lines.append(f"Top ops on {target} (what each adds to the step):")
        rows = [["op", "module", "inputs", "phase", "us", "method"]]
        rows += [[op.full_name, view.op_location(op), view.format_shapes(op, limit=3), op.phase,
                  f"{op.predictions[target].share_us:.1f}", op.predictions[target].share_method]
                 for op in top]
        lines.extend(_table(rows, right={4}))
    if text is None or text.contains(REGION_PREFIX):
        lines.extend(format_regions(step, target))
    return lines


def format_forecast(forecast: "Forecast", price_of: Callable[[str], float | None] | None = None) -> str:
    if not forecast.steps:
        return f"Habitat forecast for {', '.join(forecast.targets)}: no step recorded yet"
    if price_of is None:
        from habitat.analysis.pricing import price_per_hour as price_of
    step = forecast.latest
    warnings = view.step_warnings(step)
    choices = step_choices(step, forecast.targets, price_of)
    targets = [c.gpu for c in choices]  # ranked: fastest as seen first
    width = max(14, *(len(t) + 2 for t in targets))
    lines = _header(forecast, step, choices, warnings)
    lines.extend(_target_table(step, choices, targets, width, priced=not warnings))
    lines.extend(timeline_view.sentences(step, targets))
    target = targets[0]
    lines.extend(_methods(step, target))
    lines.extend(_top_ops_and_regions(step, target))
    if step.unsupported:
        lines.append("Not modelled (forecast from bytes moved, please report): "
                     + ", ".join(step.unsupported))
    # Names come from the trace: no control character (an ANSI escape) reaches the terminal.
    return "\n".join(terminal_text(line) for line in lines)


def forecast_text(forecast: "Forecast") -> str:
    """``print(forecast)`` (Forecast.__str__, through habitat/__init__.py): the table of
    :func:`format_forecast`, then the latest step on each of the forecast's clusters
    (predict_on's world_size or cluster), if any."""
    text = format_forecast(forecast)
    if not forecast.clusters or not any(s.ops for s in forecast.steps):
        return text
    return text + "\n\nOn clusters:\n" + "\n".join(f"  {fc}" for fc in forecast.on_clusters())
