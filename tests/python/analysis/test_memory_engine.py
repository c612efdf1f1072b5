"""The engine's memory estimate (csrc/src/memory/step_memory.cpp) gives exactly the numbers of
the Python one (habitat.analysis.memory.estimate_step_memory) on every committed trace, and
compare() reads it without decoding the step's ops."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from habitat.analysis.memory import estimate_captured_memory, estimate_step_memory, step_memory
from habitat.data.forecast import Forecast
from habitat.data.trace import load_trace

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "python" / "fixtures" / "golden_trace.json"
GPU_TRACES = sorted(ROOT.glob("benchmarks/results/*/traces/*.json.gz"))


def both(doc: dict) -> list[tuple[object, object]]:
    """(Python estimate, engine estimate) of each step of a trace document."""
    forecast = Forecast.from_trace(doc, ["A100"], keep_steps=None)
    pairs = []
    for step, fc in zip(doc["steps"], forecast.steps):
        assert fc.captured is not None
        pairs.append((estimate_step_memory(step), estimate_captured_memory(fc.captured)))
    return pairs


@pytest.mark.parametrize("path", [GOLDEN] + GPU_TRACES, ids=lambda p: "/".join(p.parts[-3:]))
def test_engine_estimate_matches_python(path: Path) -> None:
    doc = load_trace(path)
    for python, engine in both(doc):
        assert engine == python


def test_engine_estimate_matches_python_on_edge_cases() -> None:
    """Recycled storage ids, composites that make storages, views, undefined and meta tensors,
    a cut-short step (dropped ops), a strided view and the device filter of a GPU step."""
    doc = json.loads(GOLDEN.read_text())
    doc["steps"] = doc["steps"][:1]
    step = doc["steps"][0]
    ops = step["ops"]
    step["dropped_ops"] = 7
    # A storage id reused by an unrelated op (a freed address), and a strided, offset view.
    first = next(op for op in ops if op.get("outputs") and not op.get("has_children"))
    sid = first["outputs"][0]["storage"]
    last = max(op["id"] for op in ops) + 1
    ops.append({"id": last, "name": "aten::empty", "phase": "optimizer", "args": [],
                "outputs": [{"shape": [5, 3], "strides": [1, 5], "dtype": "bfloat16", "device": "cpu",
                             "storage": sid, "storage_offset": 4}]})
    ops.append({"id": last + 1, "name": "aten::add_", "overload": "Tensor", "phase": "optimizer",
                "args": [{"name": "self", "tensor": {"shape": [5, 3], "dtype": "bfloat16", "device": "cpu",
                                                    "storage": sid}},
                         {"name": "other", "tensor": {"defined": False}},
                         {"name": "alpha", "tensor": {"shape": [2], "dtype": "float32", "device": "meta",
                                                      "storage": 99}}],
                "outputs": [{"shape": [0, 3], "dtype": "float32", "device": "cpu", "storage": 12345}]})
    (python, engine), = both(doc)
    assert engine == python
    assert any("7 op(s)" in n for n in engine.notes)
    # The same step as on a GPU: only CUDA tensors count.
    for op in ops:
        for meta in [a.get("tensor") for a in op.get("args", [])] + op.get("outputs", []):
            if meta and meta.get("device") == "cpu" and meta.get("storage", 0) % 2:
                meta["device"] = "cuda:0"
    (python, engine), = both(doc)
    assert engine == python


def test_compare_reads_the_engine_estimate_without_decoding() -> None:
    doc = json.loads(GOLDEN.read_text())
    forecast = Forecast.from_trace(doc, ["A100", "H100"])
    step = forecast.latest
    assert step.holds_trace
    expected = estimate_step_memory(doc["steps"][-1])
    assert step_memory(step) == expected
    comparison = forecast.compare(["A100", "H100"])
    assert comparison.memory == expected
    assert step._trace is None  # the step's ops were never decoded into dicts
    # A step forecast from a dict (no engine copy) is estimated from the dict.
    f2 = Forecast(["A100"], doc["origin"])
    f2.add_step(doc["steps"][-1])
    assert f2.latest.captured is None
    assert step_memory(f2.latest) == expected
