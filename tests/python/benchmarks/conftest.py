"""Captured smoke-size steps of the real-model workloads, shared by the tests of
benchmarks/accuracy/real_models.py and benchmarks/gpu/real_model_kernels.py (each takes
seconds on two cores)."""
from __future__ import annotations

from typing import Any, Callable

import pytest
from bench_scripts import loaded_script


@pytest.fixture(scope="session")
def real_models():
    with loaded_script("benchmarks/accuracy/real_models.py", "real_models") as module:
        yield module


@pytest.fixture(scope="session")
def smoke_trace(real_models) -> Callable[[str, str, int], dict[str, Any]]:
    """(workload, precision, batch) -> the trace document of its steady-state step at its smoke
    sizes and that batch, captured once per session (treat it as read-only)."""
    workloads = real_models.load_workloads("cpu")
    cache: dict[tuple[str, str, int], dict[str, Any]] = {}

    def trace(name: str, precision: str, batch: int) -> dict[str, Any]:
        if (name, precision, batch) not in cache:
            cache[(name, precision, batch)] = real_models.trace_document(workloads[name], precision, batch, smoke=True)
        return cache[(name, precision, batch)]

    return trace
