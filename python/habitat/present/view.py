"""What every view of a forecast shows, in one place: the text summary (``print(forecast)``),
the HTML/Markdown report and the TensorBoard logs all take their phases, top ops, shape text,
method names with their meaning and warnings from here (prices and the ranking:
habitat/analysis/choice.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from habitat.analysis.choice import format_usd

if TYPE_CHECKING:
    from habitat.data.forecast import OpForecast, StepForecast

__all__ = ["PHASES", "METHODS", "format_usd", "format_shapes", "op_location", "phase_rows",
           "top_ops", "method_counts", "method_legend", "step_warnings"]

#: The phases of a training step, in the order every view lists them.
PHASES = ("forward", "backward", "optimizer", "other")

#: Each forecast method an op can get, with what it means (the engine's names,
#: csrc/include/habitat/predictor.h ``Method``).
METHODS: dict[str, str] = {
    "wave_scaling": "runtime-based: the kernels measured on this GPU, wave-scaled to the target (Habitat)",
    "learned_ratio": "runtime-based: measured time x learned model(target) / model(this GPU)",
    "roofline_ratio": "runtime-based: measured time x roofline(target) / roofline(this GPU)",
    "learned_shape": "shape-based: FLOPs and bytes from the op's shapes, learned efficiency on the roofline",
    "roofline": "shape-based: FLOPs and bytes from the op's shapes, roofline with a per-class efficiency",
    "fallback": "not modelled: forecast from the bytes it touches (listed under 'Not modelled')",
    "no_kernel": "views and metadata ops (reshape, view, ...): no device work, 0 us",
    "composite": "an op made of other captured ops (e.g. aten::linear): its sub-ops carry the time",
}


def format_shapes(op: "OpForecast", limit: int | None = None, sep: str = ", ") -> str:
    """An op's input tensor shapes, e.g. ``8x128x256, 256x4096`` (``scalar`` for 0-d, ``-`` for
    none); past `limit` tensors, ``+N more``."""
    shapes = op.input_shapes
    shown = shapes if limit is None else shapes[:limit]
    text = sep.join("x".join(str(d) for d in s) or "scalar" for s in shown)
    if len(shown) < len(shapes):
        text += f"{sep}+{len(shapes) - len(shown)} more"
    return text or "-"


def op_location(op: "OpForecast") -> str:
    """Where an op ran: its nn.Module path, else its autograd node (backward ops), else ``-``."""
    return op.module_path or op.autograd_node or "-"


def phase_rows(step: "StepForecast", targets: Sequence[str]) -> list[tuple[str, list[float]]]:
    """(phase, ms per target) for each phase of `step` with time on some target, in PHASES order."""
    return [(phase, [step.phase_ms[t].get(phase, 0.0) for t in targets])
            for phase in PHASES if any(step.phase_ms[t].get(phase) for t in targets)]


def top_ops(step: "StepForecast", target: str, n: int) -> list["OpForecast"]:
    """The `n` ops adding the most to the step's total on `target` (each piece of work once)."""
    return step.top_ops(target, n)


def method_counts(step: "StepForecast", target: str) -> str:
    """``learned_shape 345, no_kernel 562, ...``: ops counted in `target`'s total, per method."""
    return ", ".join(f"{m} {n}" for m, n in sorted(step.method_ops[target].items()))


def method_legend(methods: Sequence[str]) -> list[tuple[str, str]]:
    """(method, meaning) for each of `methods`, in the order of METHODS."""
    known = [(m, METHODS[m]) for m in METHODS if m in methods]
    return known + [(m, "unknown method") for m in sorted(methods) if m not in METHODS]


def step_warnings(step: "StepForecast") -> list[str]:
    """Warnings every view prints above a step's numbers (an empty step, ops the capture did
    not record)."""
    dropped = getattr(step, "dropped_ops", 0)
    if dropped:
        return [f"warning: step {step.index} ran {dropped} ops more than the capture recorded "
                "(predict_on's max_ops_per_step): they are missing from every figure below; "
                "capture again with a higher max_ops_per_step if the memory is there."]
    if not any(step.method_ops[t] for t in step.targets) and not step.op_count():
        return [f"warning: step {step.index} captured no aten ops, so every forecast is 0 ms. "
                "Check that the model runs inside `with habitat.predict_on(...)`, on the thread "
                "that entered it (ops on threads the step starts itself are not captured), and "
                "that the step does work (a cached or skipped batch records nothing)."]
    return []

