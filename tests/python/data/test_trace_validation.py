"""Impossible traces are rejected by the engine's reader with the path of the bad field."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from habitat.data.forecast import Forecast
from habitat.data.trace import TraceFormatError, validate_trace

DOC = {"format": "habitat-trace", "version": 1, "origin": {"device": "cpu"},
       "steps": [{"index": 0, "wall_ms": 1.0, "ops": [
           {"id": 1, "name": "aten::linear", "has_children": True},
           {"id": 2, "parent": 1, "depth": 1, "name": "aten::mm",
            "args": [{"name": "self", "tensor": {"shape": [4, 8], "dtype": "float32"}},
                     {"name": "mat2", "tensor": {"shape": [8, 2], "dtype": "float32"}}]}]}]}


def _doc() -> dict:
    return copy.deepcopy(DOC)


def test_a_valid_document_passes():
    assert validate_trace(_doc())["steps"][0]["ops"][1]["name"] == "aten::mm"


def test_tensor_past_2_48_elements():
    doc = _doc()
    doc["steps"][0]["ops"][1]["args"][0]["tensor"]["shape"] = [10**12, 10**12]
    with pytest.raises(TraceFormatError, match=r"steps\[0\]\.ops\[1\] \(aten::mm\)\.args\[0\]"
                                               r"\.tensor\.shape: .*more than 2\^48 elements"):
        validate_trace(doc)


def test_unknown_dtype_and_device():
    doc = _doc()
    doc["steps"][0]["ops"][1]["args"][0]["tensor"]["dtype"] = "float7"
    with pytest.raises(TraceFormatError, match=r"args\[0\]\.tensor\.dtype: unknown dtype \"float7\""):
        validate_trace(doc)
    doc = _doc()
    doc["steps"][0]["ops"][1]["args"][1]["tensor"]["device"] = "tpu:0"
    with pytest.raises(TraceFormatError, match=r"args\[1\]\.tensor\.device: unknown device \"tpu:0\""):
        validate_trace(doc)


def test_parent_cycle():
    doc = _doc()
    doc["steps"][0]["ops"][0]["parent"] = 2
    with pytest.raises(TraceFormatError, match=r"steps\[0\]\.ops\[\d\] \(aten::\w+\)\.parent: "
                                               "parent chain loops back"):
        validate_trace(doc)


def test_load_names_the_file(tmp_path: Path):
    doc = _doc()
    doc["steps"][0]["ops"][1]["args"][0]["tensor"]["dtype"] = "float7"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match="t.json.*float7"):
        Forecast.load(path, targets="A100")
