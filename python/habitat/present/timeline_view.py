"""Host-aware step times (the timeline, csrc/include/habitat/timeline.h) for the views: the
rows and sentences that print(forecast), TensorBoard, the HTML report and compare share."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from habitat.data.forecast import StepForecast

PHASE_ORDER = ("forward", "backward", "optimizer", "other")


def timeline_of(step: "StepForecast", target: str) -> dict[str, Any] | None:
    t = getattr(step, "timeline", {}).get(target)
    return t if t and t.get("valid") else None


def has_timeline(step: "StepForecast") -> bool:
    return any(timeline_of(step, t) for t in step.targets)


def rows(step: "StepForecast", targets: list[str]) -> list[tuple[str, list[str]]]:
    """(label, one cell per target) rows; empty when the step has no timeline."""
    if not has_timeline(step):
        return []
    cells: dict[str, list[str]] = {"step as seen (ms)": [], "  GPU busy": [], "  bound by": [],
                                   "  host calibration": [], "  as traced (ms)": []}
    for target in targets:
        t = timeline_of(step, target)
        cells["step as seen (ms)"].append(f"{t['step_ms']:.3f}" if t else "-")
        cells["  GPU busy"].append(f"{100 * t['gpu_busy_fraction']:.0f}%" if t else "-")
        cells["  bound by"].append(("host" if t["host_bound"] else "device") if t else "-")
        scale = t.get("host_scale", 1.0) if t else 1.0
        cells["  host calibration"].append(f"x{scale:.2f}" if scale < 1.0 else "none" if t else "-")
        cells["  as traced (ms)"].append(f"{t.get('uncalibrated_step_ms', t['step_ms']):.3f}" if t else "-")
    # The step as traced (before the calibration to untraced steps) only where there was one.
    if all(c in ("none", "-") for c in cells["  host calibration"]):
        del cells["  as traced (ms)"]
    return list(cells.items())


def host_bound_phases(t: dict[str, Any]) -> list[str]:
    phases = t.get("phases", {})
    # Phases with a real share of the step's host time (not a stray op outside any phase).
    floor = 0.02 * t.get("host_ms", 0.0)
    return [p for p in PHASE_ORDER if p in phases and phases[p].get("host_bound")
            and phases[p].get("host_ms", 0) > floor]


def sentences(step: "StepForecast", targets: list[str]) -> list[str]:
    """What the timeline means for the user: host-bound targets, their headroom, and how the
    host cadence was obtained."""
    lines: list[str] = []
    bound = [t for t in targets if (tl := timeline_of(step, t)) and tl["host_bound"]]
    if bound:
        first = timeline_of(step, bound[0])
        assert first is not None
        phases = host_bound_phases(first)
        # The device's busy time, not the kernels' sum: kernels that run side by side on several
        # streams (cuDNN's RNN layers) take the device once.
        busy = first.get("device_busy_ms", first["kernel_sum_ms"])
        lines.append(
            f"Host-bound on {', '.join(bound)}: the GPU waits for the host to launch work "
            f"({100 * (1 - first['gpu_busy_fraction']):.0f}% of the step idle on {bound[0]}; "
            f"kernels alone {busy:.3f} ms vs {first['step_ms']:.3f} ms step"
            + (f"; host-bound phases: {', '.join(phases)}" if phases else "") + "). "
            "A faster GPU will not make this step faster; fewer launches would "
            "(CUDA graphs, torch.compile, fused optimizers, larger batches) or a faster host.")
    for target in targets:
        t = timeline_of(step, target)
        if t is None:
            continue
        for note in t.get("notes", []):
            lines.append("Timeline: " + note)
        if t.get("host_speed", 1.0) != 1.0:
            lines.append(f"Timeline: host speed x{t['host_speed']:g} relative to the origin's host")
        break  # the notes describe the trace, the same for every target
    return lines


def summary(step: "StepForecast", target: str) -> dict[str, Any] | None:
    """The timeline of one target as flat numbers (JSON reports, compare)."""
    t = timeline_of(step, target)
    if t is None:
        return None
    return {"step_ms": t["step_ms"], "kernel_sum_ms": t["kernel_sum_ms"], "host_ms": t["host_ms"],
            "gpu_busy_fraction": t["gpu_busy_fraction"], "host_bound": t["host_bound"],
            "host_bound_phases": host_bound_phases(t), "host_scale": t.get("host_scale", 1.0),
            "uncalibrated_step_ms": t.get("uncalibrated_step_ms", t["step_ms"])}
