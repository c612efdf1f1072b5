"""The forecast worker finds the origin GPU of a captured step in the engine, without decoding
the step into Python (a decode holds the GIL while the next step is being recorded)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from habitat import _engine
from habitat.data import engine

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden_trace.json"


def _capsules(doc: dict) -> list:
    _, steps = engine.forecast_trace(doc, ["A100"])
    return [capsule for capsule, *_ in steps]


def test_a_cpu_step_has_no_cuda_device():
    doc = json.loads(GOLDEN.read_text())
    assert [_engine.captured_cuda_device(c) for c in _capsules(doc)] == [None] * len(doc["steps"])


def test_the_first_cuda_tensor_in_op_order_names_the_device():
    doc = copy.deepcopy(json.loads(GOLDEN.read_text()))
    ops = doc["steps"][0]["ops"]
    with_tensors = [op for op in ops if any("tensor" in a for a in op.get("args", []))]
    first, later = with_tensors[0], with_tensors[-1]
    next(a for a in later["args"] if "tensor" in a)["tensor"]["device"] = "cuda:0"
    next(a for a in first["args"] if "tensor" in a)["tensor"]["device"] = "cuda:1"
    assert _engine.captured_cuda_device(_capsules(doc)[0]) == "cuda:1"
