"""Which kernels belong to which measured run, from the events of a torch.profiler chrome trace
(Kineto's export). Torch-free.

Each run of a case is wrapped in record_function("habitat_case_<i>") on the caller's thread and
followed by a synchronize. Kineto's `gpu_user_annotation` span of a run covers only the kernels
launched from that thread; autograd launches the backward from its own device thread, so the
span misses every backward kernel (the 2026-11-26 H100 collection: each SDPA fwd+bwd row had its
fwd row's Kernel Latency). A kernel is therefore placed by its launch instead: the CUDA runtime or
driver call with its `correlation` id, made on any thread inside the run's CPU span; or, with no
launch recorded, by its GPU start (Kineto aligns the GPU clock to the CPU's) between the run's
start and the next run's (the synchronize after each run keeps every kernel of it before the
next one starts).
"""
from __future__ import annotations

import bisect
import math
from typing import Any

Event = dict[str, Any]

CASE_SPAN = "habitat_case_"
# Chrome-trace categories of the CUDA API calls that launch kernels.
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


def case_spans(events: list[Event]) -> dict[int, tuple[float, float]]:
    """CPU time span (start, end, us) of each run `habitat_case_<i>` (record_function's
    `user_annotation` events, on the thread that ran the case)."""
    return {int(e["name"][len(CASE_SPAN):]): (e["ts"], e["ts"] + e.get("dur", 0)) for e in events
            if e.get("cat") == "user_annotation" and e.get("name", "").startswith(CASE_SPAN)}


def _outermost(events: list[Event]) -> list[Event]:
    """The events not inside another of the same thread (CPU ops nest; their durations would
    count twice)."""
    out: list[Event] = []
    end: dict[Any, float] = {}
    for e in sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0))):
        tid = e.get("tid")
        if e["ts"] >= end.get(tid, -math.inf):
            out.append(e)
            end[tid] = e["ts"] + e.get("dur", 0)
    return out


def _kernel_run(kernel: Event, launches: dict[Any, float], spans: list[tuple[float, float, int]],
                starts: list[float]) -> int | None:
    """The run a kernel belongs to (the module's docstring), None for none."""
    launch = launches.get(kernel.get("args", {}).get("correlation"))
    at = kernel["ts"] if launch is None else launch
    k = bisect.bisect_right(starts, at) - 1
    if k < 0:
        return None
    _, end, run = spans[k]
    return run if launch is None or at <= end else None


def assign_kernels(events: list[Event], n: int, device: str) -> list[list[dict[str, Any]]]:
    """The kernels of each of `n` runs `habitat_case_<i>`, in start order, as {name, grid, block,
    dur (us)}. On the CPU (smoke tests) the outermost CPU ops inside a run's span stand in for
    kernels."""
    spans = case_spans(events)
    found: list[list[Event]] = [[] for _ in range(n)]
    if device == "cuda":
        launches = {e["args"]["correlation"]: e["ts"] for e in events
                    if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {})}
        ordered = sorted((lo, hi, i) for i, (lo, hi) in spans.items())
        starts = [lo for lo, _, _ in ordered]
        for e in events:
            if e.get("cat") == "kernel":
                run = _kernel_run(e, launches, ordered, starts)
                if run is not None and run < n:
                    found[run].append(e)
    else:
        for i, (lo, hi) in spans.items():
            if i < n:
                found[i] = _outermost([e for e in events if e.get("cat") == "cpu_op" and lo <= e["ts"] <= hi])
    return [[{"name": e["name"], "grid": e.get("args", {}).get("grid", [1, 1, 1]),
              "block": e.get("args", {}).get("block", [1, 1, 1]), "dur": e.get("dur", 0)}
             for e in sorted(run, key=lambda e: e["ts"])] for run in found]


def stray_kernels(events: list[Event], runs: list[list[dict[str, Any]]]) -> int:
    """Kernels of the trace that no run got (launched between runs: nothing should be)."""
    return sum(1 for e in events if e.get("cat") == "kernel") - sum(len(r) for r in runs)
