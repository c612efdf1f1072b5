"""The readable text table printed by ``print(forecast)``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from habitat.analysis.regions import format_regions

if TYPE_CHECKING:
    from habitat.data.forecast import Forecast, OpForecast

PHASES = ("forward", "backward", "optimizer", "other")
TOP_OPS = 10


def _row(label: str, cells: list[str], width: int) -> str:
    return f"  {label:<22}" + "".join(f"{c:>{width}}" for c in cells)


def _shapes(op: "OpForecast") -> str:
    text = ", ".join("x".join(str(d) for d in s) or "scalar" for s in op.input_shapes[:3])
    return text if len(text) <= 34 else text[:31] + "..."


def _cost_cells(forecast: "Forecast", price_of: Callable[[str], float | None] | None) -> list[str] | None:
    if price_of is None:
        return None
    cells = []
    for t in forecast.targets:
        price = price_of(t)
        ms = forecast.time_ms(t)
        cells.append("n/a" if price is None else f"${price * ms / 1000 / 3600 * 1000:.3f}")
    return cells


def format_forecast(forecast: "Forecast", price_of: Callable[[str], float | None] | None = None) -> str:
    if not forecast.steps:
        return f"Habitat forecast for {', '.join(forecast.targets)}: no step recorded yet"
    if price_of is None:
        try:
            from habitat.analysis.pricing import price_per_hour as price_of  # type: ignore[assignment]
        except ImportError:
            price_of = None
    step = forecast.latest
    width = max(14, *(len(t) + 2 for t in forecast.targets))
    origin = forecast.origin.get("device", "cpu")
    lines = [f"Habitat forecast: step {step.index} (measured {step.measured_ms:.2f} ms on {origin}; "
             f"{len(forecast.steps)} step(s) so far)"]
    lines.append(_row("", forecast.targets, width))
    lines.append(_row("iteration (ms)", [f"{step.total_ms[t]:.3f}" for t in forecast.targets], width))
    for phase in PHASES:
        if any(step.phase_ms[t].get(phase) for t in forecast.targets):
            lines.append(_row(f"  {phase}", [f"{step.phase_ms[t].get(phase, 0.0):.3f}"
                                             for t in forecast.targets], width))
    costs = _cost_cells(forecast, price_of)
    if costs:
        lines.append(_row("cost per 1k steps", costs, width))
    methods = step.method_ops[forecast.targets[0]]
    lines.append("  methods (ops): " + ", ".join(f"{m} {n}" for m, n in sorted(methods.items())))
    if any(m in methods for m in ("roofline", "learned_shape", "fallback")):
        lines.append("  shape-based: forecast from op shapes alone (no kernel was measured on a GPU)")
    target = forecast.targets[0]
    lines.append(f"Top ops on {target}:")
    lines.append(f"  {'op':<34}{'module':<26}{'inputs':<36}{'phase':<10}{'us':>10}  method")
    for op in step.top_ops(target, TOP_OPS):
        p = op.predictions[target]
        lines.append(f"  {op.full_name[:33]:<34}{op.module_path[:25]:<26}{_shapes(op):<36}"
                     f"{op.phase:<10}{p.share_us:>10.1f}  {p.share_method}")
    lines.extend(format_regions(step, target))
    if step.unsupported:
        lines.append("Not modelled (forecast from bytes moved, please report): "
                     + ", ".join(step.unsupported))
    return "\n".join(lines)
