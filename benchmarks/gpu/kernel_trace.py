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
next one starts). Should the CPU spans' clock disagree with CUPTI's (kernels launched outside
every span), the synchronize after each run, timed by CUPTI like the launches, delimits the runs
instead (place_kernels).
"""
from __future__ import annotations

import bisect
import math
from typing import Any

Event = dict[str, Any]

CASE_SPAN = "habitat_case_"
# Chrome-trace categories of the CUDA API calls that launch kernels.
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
SYNCHRONIZE = "cudaDeviceSynchronize"  # torch.cuda.synchronize(), after each run


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


def _launch_times(events: list[Event]) -> dict[Any, float]:
    """The CPU start (us) of each CUDA API call, by correlation id."""
    return {e["args"]["correlation"]: e["ts"] for e in events
            if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {})}


def _by_spans(kernels: list[Event], launches: dict[Any, float], spans: dict[int, tuple[float, float]]) -> list[int | None]:
    """Each kernel's run by the module's rule, None for none."""
    ordered = sorted((lo, hi, i) for i, (lo, hi) in spans.items())
    starts = [lo for lo, _, _ in ordered]
    runs: list[int | None] = []
    for kernel in kernels:
        launch = launches.get(kernel.get("args", {}).get("correlation"))
        at = kernel["ts"] if launch is None else launch
        k = bisect.bisect_right(starts, at) - 1
        runs.append(ordered[k][2] if k >= 0 and (launch is None or at <= ordered[k][1]) else None)
    return runs


def run_synchronizes(events: list[Event], spans: dict[int, tuple[float, float]], n: int) -> list[Event] | None:
    """The cudaDeviceSynchronize that follows each of the n runs, in run order: n consecutive
    ones, lined up with the runs' spans where their gaps to the spans' ends (CUPTI's clock less
    the CPU's, plus a few us) agree best: the profiler may add one of its own, at its exit (the
    first alignment wins ties). None without a span or a synchronize per run."""
    ends = [spans[i][1] for i in range(n) if i in spans]
    syncs = sorted((e for e in events if e.get("cat") == "cuda_runtime" and e.get("name") == SYNCHRONIZE),
                   key=lambda e: e["ts"])
    if not ends or len(ends) != n or len(syncs) < n:
        return None
    best: tuple[float, int] | None = None
    for j in range(len(syncs) - n + 1):
        gaps = [syncs[j + i]["ts"] - end for i, end in enumerate(ends)]
        if best is None or max(gaps) - min(gaps) < best[0] / 2:
            best = (max(gaps) - min(gaps), j)
    return syncs[best[1]:best[1] + n] if best else None


def _by_synchronizes(kernels: list[Event], launches: dict[Any, float], syncs: list[Event]) -> list[int | None]:
    """Each kernel's run by the synchronizes alone (CUPTI's clock, like launches and kernels): run
    i's kernels are launched, and start, after synchronize i-1 returned and before synchronize i
    did."""
    ends = [e["ts"] + e.get("dur", 0) for e in syncs]
    runs: list[int | None] = []
    for kernel in kernels:
        k = bisect.bisect_left(ends, launches.get(kernel.get("args", {}).get("correlation"), kernel["ts"]))
        runs.append(k if k < len(ends) else None)
    return runs


def place_kernels(events: list[Event], n: int) -> tuple[list[list[Event]], str]:
    """The kernel events of each of `n` runs on CUDA, and the rule that placed them: "spans"
    (the module's), or "synchronizes" where that one leaves kernels out and the synchronize after
    each run (run_synchronizes) places more of them: the CPU spans' clock disagreeing with
    CUPTI's."""
    kernels = [e for e in events if e.get("cat") == "kernel"]
    launches = _launch_times(events)
    spans = case_spans(events)
    runs, rule = _by_spans(kernels, launches, spans), "spans"
    syncs = run_synchronizes(events, spans, n) if None in runs else None
    if syncs:
        by_syncs = _by_synchronizes(kernels, launches, syncs)
        if by_syncs.count(None) < runs.count(None):
            runs, rule = by_syncs, "synchronizes"
    found: list[list[Event]] = [[] for _ in range(n)]
    for kernel, run in zip(kernels, runs):
        if run is not None and run < n:
            found[run].append(kernel)
    return found, rule


def assign_kernels(events: list[Event], n: int, device: str) -> list[list[dict[str, Any]]]:
    """The kernels of each of `n` runs `habitat_case_<i>`, in start order, as {name, grid, block,
    dur (us)} (place_kernels). On the CPU (smoke tests) the outermost CPU ops inside a run's span
    stand in for kernels."""
    if device == "cuda":
        found = place_kernels(events, n)[0]
    else:
        spans = case_spans(events)
        found = [_outermost([e for e in events if e.get("cat") == "cpu_op" and spans[i][0] <= e["ts"] <= spans[i][1]])
                 if i in spans else [] for i in range(n)]
    return [[{"name": e["name"], "grid": e.get("args", {}).get("grid", [1, 1, 1]),
              "block": e.get("args", {}).get("block", [1, 1, 1]), "dur": e.get("dur", 0)}
             for e in sorted(run, key=lambda e: e["ts"])] for run in found]


def trace_warnings(events: list[Event], n: int) -> list[str]:
    """What a CUDA pass's log should say about its kernels' placement: the fallback rule, if
    place_kernels needed it, and kernels no run got (launched between runs: none should be)."""
    found, rule = place_kernels(events, n)
    stray = sum(1 for e in events if e.get("cat") == "kernel") - sum(len(r) for r in found)
    notes = ["kernels placed by the synchronize after each run: launches fell outside the runs' CPU spans "
             "(the trace's CPU and CUPTI clocks disagree)"] if rule != "spans" else []
    return notes + ([f"{stray} kernels launched outside every case's run (left out)"] if stray else [])
