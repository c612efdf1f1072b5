"""Compiled regions of a step: what torch.compile (the ``habitat`` backend) ran, per graph.

A compiled graph runs as inductor's fused kernels (recorded as ``habitat_fused::<kernel>`` ops)
plus the aten kernels it calls itself (extern ops: mm, addmm, convolution, fallbacks), all
recorded inside the region ``compiled/graph_<id>`` (see habitat/capture/compile.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from habitat.data.forecast import OpForecast, StepForecast

REGION_PREFIX = "compiled/graph_"
FUSED_PREFIX = "habitat_fused::"
GRAPH_RUN_OP = "habitat::compiled_graph"


@dataclass
class FusedKernel:
    name: str
    kind: str                  # inductor's kernel kind: pointwise, reduction, ...
    sources: list[str]         # the aten ops it fuses
    time_us: float


@dataclass
class CompiledRegion:
    """One compiled graph as it ran in a step, with its forecast on one target."""

    name: str                  # compiled/graph_<id>
    graph_id: int
    phase: str                 # forward or backward (a graph runs in one phase)
    kernels: list[FusedKernel] = field(default_factory=list)
    extern_ops: list[tuple[str, float]] = field(default_factory=list)  # (op, us)
    time_us: float = 0.0


def _graph_id(region: str) -> int | None:
    if not region.startswith(REGION_PREFIX):
        return None
    try:
        return int(region[len(REGION_PREFIX):])
    except ValueError:
        return None


def _fused_args(trace_op: dict[str, Any] | None) -> tuple[str, list[str]]:
    args = {a["name"]: a for a in (trace_op or {}).get("args", [])}
    kind = args.get("kind", {}).get("str", "")
    sources = [s for s in args.get("sources", {}).get("str", "").split(";") if s]
    return kind, sources


def compiled_regions(step: "StepForecast", target: str) -> list[CompiledRegion]:
    """The compiled regions of `step`, in graph order, with times on `target`.

    A region's time counts each of its ops once: an op nested in another op of the region
    is part of that op's forecast already."""
    all_ops = (step.trace or {}).get("ops", [])
    # Only ops recorded inside a compiled region become objects (a step that compiled
    # nothing builds none); an op's parent in the same region is one of them too.
    inside = [i for i, op in enumerate(all_ops) if op.get("module_path", "").startswith(REGION_PREFIX)]
    if not inside:
        return []
    trace_ops = {all_ops[i]["id"]: all_ops[i] for i in inside}
    region_ops = step.ops_at(inside)
    by_id = {op.id: op for op in region_ops}
    regions: dict[int, CompiledRegion] = {}
    for op in region_ops:
        graph_id = _graph_id(op.module_path)
        if graph_id is None:
            continue
        region = regions.setdefault(graph_id, CompiledRegion(op.module_path, graph_id, op.phase))
        parent: "OpForecast | None" = by_id.get(op.parent) if op.parent is not None else None
        if parent is not None and parent.module_path == op.module_path:
            continue
        us = op.time_us(target)
        region.time_us += us
        if op.name == GRAPH_RUN_OP:
            continue  # the run's record: it holds measured kernels no fused record matched
        if op.name.startswith(FUSED_PREFIX):
            kind, sources = _fused_args(trace_ops.get(op.id))
            region.kernels.append(FusedKernel(op.name[len(FUSED_PREFIX):], kind, sources, us))
        else:
            region.extern_ops.append((op.full_name, us))
    return [regions[k] for k in sorted(regions)]


def format_regions(step: "StepForecast", target: str, top_kernels: int = 3) -> list[str]:
    """Lines for the printed forecast (empty when nothing compiled ran)."""
    regions = compiled_regions(step, target)
    if not regions:
        return []
    lines = [f"Compiled regions on {target} (torch.compile):"]
    for r in regions:
        lines.append(f"  {r.name:<20}{r.phase:<10}{len(r.kernels):>4} fused kernels"
                     f"{len(r.extern_ops):>4} extern ops{r.time_us:>12.1f} us")
        for k in sorted(r.kernels, key=lambda k: k.time_us, reverse=True)[:top_kernels]:
            sources = ", ".join(dict.fromkeys(s.removeprefix("aten::") for s in k.sources))
            lines.append(f"    {k.name[:40]:<42}{k.time_us:>10.1f} us  <- {sources[:60]}")
    return lines
