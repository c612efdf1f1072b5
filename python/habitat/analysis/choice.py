"""The one answer a forecast gives: which GPU runs the step fastest as the user will see it,
which costs least per step, and where a faster GPU would not help.

Every view (``print(forecast)``, ``habitat compare``, the report and its chart) ranks and
prices GPUs here, on the step as seen (the timeline: the host's launch cadence and its waits
for the device included, csrc/include/habitat/timeline.h), never on the kernel sum, which
they show beside it. Costs are in units that do not change from model to model: USD per GPU
hour and USD per million steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from habitat.data.step_forecast import StepForecast

#: Steps priced by :attr:`GpuChoice.usd_per_million_steps`.
MILLION = 1_000_000
#: GPUs whose step as seen is within this fraction of the fastest are named with it.
TIE = 0.02
#: Decimals of a millisecond a ranking compares: host-bound GPUs play the same host cadence and
#: differ by float rounding (12.444431999999761 vs ...775 ms), which must not rank them; equal
#: times rank cheapest first.
RANK_DECIMALS = 6


def usd_per_million_steps(usd_per_hour: float, step_ms: float) -> float:
    """What a million steps of `step_ms` cost at `usd_per_hour`."""
    return usd_per_hour * step_ms / 1000.0 * MILLION / 3600.0


@dataclass(frozen=True)
class GpuChoice:
    """One GPU's answer: the step as seen (the kernel sum where the step has no timeline),
    the kernel sum beside it, whether the GPU would wait on the host, its price, and whether
    the step fits in its memory (None: not checked)."""

    gpu: str
    step_ms: float
    kernel_ms: float
    host_bound: bool | None  # None: no timeline (the step as seen is the kernel sum)
    usd_per_hour: float | None
    fits: bool | None = None

    @property
    def usd_per_million_steps(self) -> float | None:
        if self.usd_per_hour is None:
            return None
        return usd_per_million_steps(self.usd_per_hour, self.step_ms)


def ranked(choices: Sequence[GpuChoice]) -> list[GpuChoice]:
    """Fastest as seen first; equal times cheapest first, unpriced last."""
    return sorted(choices, key=_rank_key)


def _rank_key(c: GpuChoice) -> tuple[float, float]:
    return round(c.step_ms, RANK_DECIMALS), _cost_key(c)


def _cost_key(c: GpuChoice) -> float:
    cost = c.usd_per_million_steps
    return float("inf") if cost is None else cost


def step_choices(step: "StepForecast", targets: Sequence[str],
                 price_of: Callable[[str], float | None] | None) -> list[GpuChoice]:
    """The choices of `step` on `targets`, ranked (:func:`ranked`)."""
    out = []
    for target in targets:
        timeline = step.timeline.get(target) if step.timeline else None
        seen = timeline is not None and bool(timeline.get("valid"))
        out.append(GpuChoice(
            gpu=target, step_ms=step.step_ms(target), kernel_ms=step.total_ms[target],
            host_bound=bool(timeline["host_bound"]) if seen and timeline else None,
            usd_per_hour=None if price_of is None else price_of(target)))
    return ranked(out)


def fastest(choices: Sequence[GpuChoice]) -> GpuChoice | None:
    """The fastest as seen among the GPUs the step fits on (all of them if it fits none)."""
    eligible = [c for c in choices if c.fits is not False] or list(choices)
    return min(eligible, key=_rank_key) if eligible else None


def cheapest(choices: Sequence[GpuChoice]) -> GpuChoice | None:
    """The lowest cost per step among priced GPUs the step fits on; None when none is priced."""
    priced = [c for c in choices if c.usd_per_hour is not None and c.fits is not False]
    return min(priced, key=lambda c: (_cost_key(c), _rank_key(c)[0])) if priced else None


def verdict(choices: Sequence[GpuChoice]) -> str:
    """The answer in one line: the fastest as seen (with those within 2% of it), the cheapest
    per step, and the GPUs where the host, not the GPU, sets the pace."""
    best = fastest(choices)
    if best is None:
        return "No GPU to choose from."
    near = [c.gpu for c in choices if c is not best and c.fits is not False
            and c.step_ms <= (1 + TIE) * best.step_ms]
    parts = [f"Fastest as seen: {best.gpu} ({best.step_ms:.3f} ms a step"
             + (f"; within {TIE:.0%}: {_names(near)}" if near else "") + ")."]
    low = cheapest(choices)
    if low is not None:
        parts.append(f"Cheapest: {low.gpu} (${format_usd(low.usd_per_million_steps or 0.0)} per "
                     f"1M steps at ${low.usd_per_hour:.2f}/h).")
    bound = [c.gpu for c in choices if c.host_bound]
    if bound:
        where = "every GPU" if len(bound) == len(choices) > 1 else _names(bound)
        parts.append(f"Host-bound on {where}: a faster GPU will not help.")
    if all(c.host_bound is None for c in choices):
        parts.append("(No host timeline: the step as seen is the kernel sum.)")
    return " ".join(parts)


def _names(gpus: Sequence[str], shown: int = 4) -> str:
    """`gpus` named, past `shown` of them counted (``A, B, C, D and 3 more``)."""
    if len(gpus) <= shown:
        return ", ".join(gpus)
    return f"{', '.join(gpus[:shown])} and {len(gpus) - shown} more"


def format_usd(x: float) -> str:
    """Dollars with cents; below a cent, two significant digits (0.00062), never 1e-04."""
    if abs(x) >= 0.01 or x == 0:
        return f"{x:,.2f}"
    return f"{x:.{1 - math.floor(math.log10(abs(x)))}f}"
