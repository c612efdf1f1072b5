"""A trace document handed to the engine as Python objects (habitat._engine walks the dict
into a TraceTree) reads exactly as its JSON text does: the same trace, bit-identical
forecasts, the same errors with the same paths; values JSON cannot hold are named."""
from __future__ import annotations

import copy
import gzip
import json
import math
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable

import pytest
from subprocess_env import subprocess_env

from habitat import _engine
from habitat.data.forecast import Forecast
from habitat.data.trace import TraceFormatError, save_trace, validate_trace

REPO = Path(__file__).resolve().parents[3]
RECORDED = sorted(REPO.glob("benchmarks/results/*/traces/*.json.gz"))
GOLDEN = sorted((REPO / "tests" / "python" / "fixtures").glob("golden_trace*.json"))
TRACES = RECORDED + GOLDEN


def _text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()


def test_the_traces_are_there() -> None:
    assert len(RECORDED) >= 16 and GOLDEN


@pytest.mark.parametrize("path", TRACES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_document_reads_as_its_text(path: Path) -> None:
    text = _text(path)
    assert _engine.validate_trace_doc(json.loads(text)) == _engine.validate_trace_json(text)


# Every recorded and golden trace forecast from its dict and from its text for 20 GPUs, with
# the per-op memo off (a fresh prediction of every op on both paths), in a child process.
_COMPARE = r"""
import gzip, json, sys
from pathlib import Path
from habitat import _engine
from habitat.data.devices import devices
from habitat.data.engine import weights_dir
gpus = [d.name for d in devices()][:20]
differ = []
for name in sys.argv[1:]:
    path = Path(name)
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode()
    a_origin, a_steps = _engine.forecast_trace(json.loads(text), gpus, weights_dir())
    b_origin, b_steps = _engine.forecast_trace(text, gpus, weights_dir())
    same = a_origin == b_origin and len(a_steps) == len(b_steps) and all(
        a[1:4] == b[1:4] and bytes(a[4]) == bytes(b[4])
        and _engine.captured_trace_json(a[0]) == _engine.captured_trace_json(b[0])
        for a, b in zip(a_steps, b_steps))
    if not same:
        differ.append(name)
print(json.dumps({"traces": len(sys.argv) - 1, "differ": differ}))
"""


def test_forecasts_are_bit_identical_to_the_text_path() -> None:
    env = subprocess_env(HABITAT_OP_MEMO="0")
    out = subprocess.run([sys.executable, "-c", _COMPARE, *map(str, TRACES)], env=env,
                         capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"traces": len(TRACES), "differ": []}


def test_from_trace_of_a_dict_equals_from_trace_of_its_file(tmp_path: Path) -> None:
    path = GOLDEN[0]
    by_dict = Forecast.from_trace(json.loads(path.read_text()), ["A100", "H100"])
    by_file = Forecast.from_trace(path, ["A100", "H100"])
    assert [s.summary() for s in by_dict.steps] == [s.summary() for s in by_file.steps]


# ----- errors: the same message whichever way the document comes -----------------------------

DOC = {"format": "habitat-trace", "version": 2, "origin": {"device": "cpu"},
       "steps": [{"index": 0, "wall_ms": 1.0, "ops": [
           {"id": 1, "name": "aten::linear", "has_children": True},
           {"id": 2, "parent": 1, "depth": 1, "name": "aten::mm",
            "args": [{"name": "self", "tensor": {"shape": [4, 8], "dtype": "float32"}},
                     {"name": "mat2", "tensor": {"shape": [8, 2], "dtype": "float32"}},
                     {"name": "alpha", "float": 1.5}],
            "kernels": [{"name": "gemm", "grid": [1, 2, 3], "duration_us": 2.5}]}]}]}


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


OP = ("steps", 0, "ops", 1)
BAD = {
    "negative shape": _set(OP + ("args", 0, "tensor", "shape", 1), -1),
    "huge shape": _set(OP + ("args", 0, "tensor", "shape"), [10**12, 10**12]),
    "bool for an int": _set(OP + ("args", 0, "tensor", "shape", 0), True),
    "float for an int": _set(OP + ("id",), 2.0),
    "int past 2^64": _set(OP + ("id",), 2**70),
    "int past int64": _set(OP + ("depth",), 2**63 + 5),
    "negative id": _set(OP + ("id",), -3),
    "unknown dtype": _set(OP + ("args", 1, "tensor", "dtype"), "float7"),
    "str for a number": _set(("steps", 0, "wall_ms"), "1.0"),
    "list for an object": _set(("origin",), [1, 2]),
    "missing name": lambda d: d["steps"][0]["ops"][1].pop("name"),
    "two values": _set(OP + ("args", 2, "int"), 3),
    "grid of 2": _set(OP + ("kernels", 0, "grid"), [1, 2]),
    "parent cycle": _set(("steps", 0, "ops", 0, "parent"), 2),
    "duplicate id": _set(OP + ("id",), 1),
    "newer version": _set(("version",), 99),
    "bad format": _set(("format",), ["habitat-trace"]),
    "none not true": _set(OP + ("args", 2), {"name": "x", "none": False}),
    "unicode": _set(OP + ("args", 1, "tensor", "dtype"), "fl\u00f6at32"),
    "nul in a name": _set(OP + ("args", 1, "tensor", "device"), "cu\x00da"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_errors_are_those_of_the_text_path(name: str) -> None:
    doc = copy.deepcopy(DOC)
    BAD[name](doc)
    with pytest.raises(TraceFormatError) as by_text:
        _engine.validate_trace_json(json.dumps(doc))
    with pytest.raises(TraceFormatError) as by_doc:
        _engine.validate_trace_doc(doc)
    assert str(by_doc.value) == str(by_text.value)


def test_valid_edge_values_read_as_their_text() -> None:
    doc = copy.deepcopy(DOC)
    doc["steps"][0]["ops"][1]["args"][2]["float"] = -0.0
    doc["steps"][0]["ops"][1]["args"].append({"name": "big", "int": -(2**63)})
    doc["steps"][0]["ops"][1]["args"].append({"name": "tiny", "float": 5e-324})
    doc["steps"][0]["ops"][1]["args"].append({"name": "whole", "float": 3.0})
    doc["steps"][0]["ops"][1]["args"].append({"name": "ints", "ints": (1, 2, 3)})  # a tuple
    doc["steps"][0]["ops"][1]["args"].append({"name": "s", "str": "\u00e9\U0001F600"})
    doc["steps"][0]["ops"][1]["args"].append({"name": "inf", "float": "inf"})
    doc["steps"][0]["ops"][1]["module_path"] = "enc.\u00fc"
    doc["steps"][0]["ops"][1]["kernels"][0]["stream"] = 2**32 - 1
    doc["steps"][0]["ops"][1]["kernels"][0]["duration_us"] = 10**12  # the largest time read
    doc["steps"][0]["ops"][1]["args"].append({"name": "huge", "float": 2**64 + 7})  # read as a double
    doc["forecast"] = {1: [None, True, {None: 2.5}], "x": OrderedDict(a=1)}  # ignored, JSON-able
    assert _engine.validate_trace_doc(doc) == _engine.validate_trace_json(json.dumps(doc))


@pytest.mark.parametrize(("value", "message"), [
    (math.nan, r'steps\[0\]\.ops\[1\] \(aten::mm\)\.args\[2\]\.float: nan is not a JSON number: '
               r'write non-finite floats as "inf", "-inf" or "nan"'),
    (-math.inf, r"args\[2\]\.float: -inf is not a JSON number"),
    ({1, 2}, r"args\[2\]\.float: a set is not a JSON value: documents hold only dicts, lists, str, "
             r"int, float, bool and None"),
    (b"1.5", r"args\[2\]\.float: a bytes is not a JSON value"),
    ("\ud800", r"args\[2\]\.float: a str that is not valid Unicode"),
    (10**400, r"args\[2\]\.float: an integer too large for a JSON number"),
])
def test_values_json_cannot_hold_are_named(value: Any, message: str) -> None:
    doc = copy.deepcopy(DOC)
    doc["steps"][0]["ops"][1]["args"][2]["float"] = value
    with pytest.raises(TraceFormatError, match="^invalid habitat trace: (steps\\[0\\]\\.ops\\[1\\] \\(aten::mm\\)\\.)?" + message):
        validate_trace(doc)
    with pytest.raises(TraceFormatError, match=message):
        Forecast.from_trace(doc, ["A100"])


def test_values_json_cannot_hold_anywhere_are_refused() -> None:
    # json.dumps refused them in keys the reader ignores too; so does the walk.
    doc = copy.deepcopy(DOC)
    doc["forecast"] = {"note": object()}
    with pytest.raises(TraceFormatError, match=r"^invalid habitat trace: forecast\.note: a object "):
        validate_trace(doc)
    doc["forecast"] = {(1, 2): "tuple key"}
    with pytest.raises(TraceFormatError, match=r"a key of type tuple: keys must be str"):
        validate_trace(doc)


def test_a_document_that_contains_itself() -> None:
    doc = copy.deepcopy(DOC)
    loop: list[Any] = []
    loop.append(loop)
    doc["forecast"] = loop
    with pytest.raises(TraceFormatError, match=r"nested more than 256 levels deep"):
        validate_trace(doc)


def test_not_a_dict_and_other_mappings(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="a trace document is a dict, got list"):
        validate_trace([])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="forecast_trace takes a trace document"):
        _engine.forecast_trace(5, ["A100"])
    proxy = MappingProxyType(copy.deepcopy(DOC))
    assert validate_trace(proxy) == validate_trace(copy.deepcopy(DOC))
    save_trace(proxy, tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text()) == validate_trace(DOC)
