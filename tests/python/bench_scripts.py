"""Benchmark scripts under benchmarks/ loaded as modules, for the tests of their functions."""
from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# A traced op's fields that differ between two runs of the same step.
RUN_FIELDS = {"storage", "start_us", "wall_us", "overhead_us", "own_before_us"}


def load_script(relative: str, name: str) -> ModuleType:
    """Runs ROOT/relative as module `name`, registered in sys.modules (dataclasses and pickling
    look their module up by name)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec and spec.loader, f"cannot load {relative}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def loaded_script(relative: str, name: str) -> Iterator[ModuleType]:
    """load_script for the duration of a with block (a module-scoped fixture). sys.path comes
    back as it was: a script that puts the source tree's python/ first would make later
    spawned processes import a habitat without its built extensions."""
    path = list(sys.path)
    try:
        yield load_script(relative, name)
    finally:
        sys.modules.pop(name, None)
        sys.path[:] = path


def without_run_fields(value: Any) -> Any:
    """A traced step's ops (or any part of them) without RUN_FIELDS: two traces of the same
    work compare equal."""
    if isinstance(value, dict):
        return {k: without_run_fields(v) for k, v in value.items() if k not in RUN_FIELDS}
    if isinstance(value, list):
        return [without_run_fields(v) for v in value]
    return value
