"""Measuring a pass of cases (kernel_case.Case): warm-up (cuDNN's autotuning) first, then one
torch.profiler pass for the kernels of a few runs of each case (kernel_trace.py), then CUDA
events around single calls. And the making of a pass: as many shapes' cases as the device's
memory takes."""
from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, TypeVar

import torch
from kernel_case import Case, precision_context, quiet
from kernel_rows import Kernel, Row, make_row
from kernel_trace import assign_kernels, trace_warnings

Shape = TypeVar("Shape")
# Share of the device's memory the tensors of one pass may hold (checked as its cases are made):
# the runs' outputs and cuDNN's workspaces need the rest.
PASS_MEMORY_SHARE = 0.4


def warm_up(cases: list[Case], device: str, runs: int, deadline: float = math.inf) -> list[Case]:
    """Runs each case `runs` times (at least once) outside any measurement: cuDNN's autotuner
    tries its candidates here, so they never reach the kernel list. Cases that fail (a backend
    that does not run this shape or dtype, out of memory) are dropped, and so are the cases
    left when the deadline (time.time()) passes."""
    kept = []
    for case in cases:
        if time.time() > deadline:
            break
        try:
            with quiet(), precision_context(case.precision):
                for _ in range(max(1, runs)):
                    case.run()
            kept.append(case)
        except (RuntimeError, NotImplementedError, ValueError):
            pass
        if device == "cuda":
            torch.cuda.synchronize()
    return kept


def time_case(case: Case, device: str, warmup: int, repeats: int) -> float:
    """Median time in milliseconds."""
    with quiet(), precision_context(case.precision):
        for _ in range(warmup):
            case.run()
        times = []
        if device == "cuda":
            torch.cuda.synchronize()
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                case.run()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        else:
            for _ in range(repeats):
                t0 = time.perf_counter()
                case.run()
                times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def kernel_launches(cases: list[Case], device: str, runs: int = 1) -> list[list[list[Kernel]]]:
    """Kernels of `runs` runs of each case (warmed up before: see warm_up), from one profiler
    pass: [case][run] -> the run's kernels in launch order. Each run ends with a synchronize,
    which kernel_trace.assign_kernels relies on."""
    from torch.profiler import ProfilerActivity, profile, record_function
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    runs = max(1, runs)
    with profile(activities=activities) as prof:
        for i, case in enumerate(cases):
            for r in range(runs):
                with quiet(), precision_context(case.precision), record_function(f"habitat_case_{i * runs + r}"):
                    case.run()
                if device == "cuda":
                    torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    spans = assign_kernels(events, len(cases) * runs, device)
    for note in trace_warnings(events, len(cases) * runs) if device == "cuda" else []:
        print(f"warning: {note}", file=sys.stderr)
    return [spans[i * runs:(i + 1) * runs] for i in range(len(cases))]


def measure(cases: list[Case], device: str, warmup: int, repeats: int, meta: dict[str, Any],
            sms: int, deadline: float = math.inf, profiled_runs: int = 1) -> list[tuple[str, Row]]:
    """(file, row) for a pass of cases: warm-up (autotuning) first, then the kernels of
    `profiled_runs` runs per case, then the timing. Cases not warmed up by the deadline are
    left out."""
    cases = warm_up(cases, device, warmup, deadline)
    launches = kernel_launches(cases, device, profiled_runs) if cases else []
    rows = []
    for case, runs in zip(cases, launches):
        try:
            latency = time_case(case, device, 1, repeats)
        except RuntimeError:
            continue
        rows.append((case.file, make_row(case, latency, runs, meta, sms)))
    return rows


def next_pass(shapes: list[Shape], make_cases: Callable[[list[Shape]], list[Case]], max_shapes: int,
              memory_full: Callable[[], bool]) -> tuple[list[Case], list[Shape], int]:
    """The cases of the next pass, made shape by shape from the front of `shapes` until
    `max_shapes` are in or memory_full() says the device holds enough; the shapes left; and how
    many shapes failed to be made (out of memory, an unsupported combination): those are
    skipped."""
    cases: list[Case] = []
    taken = failed = 0
    while taken < len(shapes) and taken - failed < max(1, max_shapes) and not (cases and memory_full()):
        shape = shapes[taken]
        taken += 1
        try:
            cases += make_cases([shape])
        except (RuntimeError, NotImplementedError, ValueError):
            failed += 1
    return cases, shapes[taken:], failed


def device_memory_full(device: str, share: float = PASS_MEMORY_SHARE) -> Callable[[], bool]:
    """memory_full for next_pass: on CUDA, whether the tensors made hold `share` of the device's
    memory; on the CPU (smoke tests, small shapes) never."""
    if device != "cuda":
        return lambda: False
    total = torch.cuda.get_device_properties(0).total_memory
    return lambda: torch.cuda.memory_allocated() > share * total
