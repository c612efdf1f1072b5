"""Trace documents from Python: round trips, validation messages and file errors."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from habitat import _engine
from habitat.data.trace import (
    FORMAT_VERSION,
    TraceFormatError,
    load_trace,
    save_trace,
    validate_trace,
)


def full_doc() -> dict[str, Any]:
    """A canonical document using every op field and every argument kind."""
    return {
        "format": "habitat-trace",
        "version": 2,  # the version written (Trace::kFormatVersion)
        "origin": {
            "device": "A100-SXM4-80GB",
            "host": "AMD EPYC 7763",
            "torch_version": "2.13.0",
            "habitat_version": "0.1.0",
            "allow_tf32": True,
            "autocast": False,
            "cudnn_allow_tf32": True,
            "float32_matmul_precision": "highest",
            "autocast_dtype": "",
        },
        "steps": [
            {
                "index": 0,
                "wall_ms": 12.5,
                "measured_peak_bytes": 1 << 34,
                "dropped_ops": 2,
                "ops": [
                    {
                        "id": 1,
                        "has_children": True,
                        "name": "aten::linear",
                        "args": [
                            {"name": "input", "tensor": {"shape": [8, 512], "dtype": "bfloat16",
                                                         "device": "cuda:0", "storage": 17}},
                            {"name": "bias", "tensor": {"defined": False}},
                        ],
                        "outputs": [{"shape": [8, 1024], "dtype": "bfloat16", "device": "cuda:0"}],
                        "phase": "forward",
                        "module_path": "encoder.fc",
                        "start_us": 1.25,
                        "wall_us": 40.0,
                    },
                    {
                        "id": 2,
                        "parent": 1,
                        "depth": 1,
                        "name": "aten::addmm",
                        "overload": "out",
                        "args": [
                            {"name": "mat2", "tensor": {"shape": [512, 1024], "strides": [1, 512],
                                                        "dtype": "bfloat16", "contiguous": False,
                                                        "storage_offset": 4}},
                            {"name": "tensors", "tensors": [{"shape": [3]}, {"defined": False}]},
                            {"name": "dim", "int": -1},
                            {"name": "size", "ints": [2, -3]},
                            {"name": "alpha", "float": 0.5},
                            {"name": "min", "float": "-inf"},
                            {"name": "keepdim", "bool": True},
                            {"name": "mask", "bools": [True, False]},
                            {"name": "approximate", "str": "tanh"},
                            {"name": "dtype", "none": True},
                            {"name": "generator", "other": "Generator"},
                        ],
                        "phase": "backward",
                        "autograd_node": "AddmmBackward0",
                        "thread": 1,
                        "wall_us": 30.0,
                        "kernels": [
                            {"name": "sm80_gemm", "grid": [8, 16, 1], "block": [256, 1, 1],
                             "registers_per_thread": 232, "static_shared_bytes": 1024,
                             "dynamic_shared_bytes": 98304, "duration_us": 27.5, "stream": 7},
                            {"name": "elementwise", "duration_us": 1.5},
                        ],
                    },
                ],
            },
            {"index": 1, "wall_ms": 11.0, "ops": []},
        ],
    }


def test_validate_returns_canonical_document_unchanged() -> None:
    doc = full_doc()
    assert validate_trace(doc) == doc


def test_save_then_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    save_trace(full_doc(), path)
    assert load_trace(path) == full_doc()
    assert load_trace(str(path)) == full_doc()
    assert not (tmp_path / "trace.json.tmp").exists()


def test_written_file_is_compact_json(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    save_trace(full_doc(), path)
    text = path.read_text()
    assert "\n" not in text and ": " not in text
    assert json.loads(text)["format"] == "habitat-trace"


def test_defaults_are_dropped_and_restored() -> None:
    doc = full_doc()
    op = doc["steps"][0]["ops"][0]
    op.update({"depth": 0, "overload": "", "thread": 0, "parent": None, "autograd_node": "",
               "kernels": []})
    op["args"][0]["tensor"].update({"strides": [512, 1], "contiguous": True})
    # Spelling out defaults changes nothing: the canonical form leaves them out again.
    assert validate_trace(doc) == full_doc()


def test_unknown_top_level_keys_are_ignored() -> None:
    doc = full_doc() | {"forecast": {"A100": {"iteration_ms": 3.0}}}
    assert validate_trace(doc) == full_doc()


def test_format_version_constant() -> None:
    assert FORMAT_VERSION == 2  # 2: the timeline fields (format 1 still loads)
    assert issubclass(TraceFormatError, ValueError)
    assert TraceFormatError is _engine.TraceFormatError


def _corrupted(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(full_doc())
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (_corrupted(format="chrome-trace"),
         '"format" is "chrome-trace", expected "habitat-trace"'),
        (_corrupted(version=3),
         "written by a newer Habitat (version 3); this build reads up to version 2: "
         "upgrade habitat"),
        (_corrupted(steps="none"), "steps: expected an array, got string"),
        ({"format": "habitat-trace", "version": 1, "origin": {}}, "steps: missing required field"),
    ],
)
def test_invalid_documents_name_the_problem(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(TraceFormatError) as info:
        validate_trace(doc)
    assert message in str(info.value)


def test_bad_field_names_op_and_path() -> None:
    doc = full_doc()
    doc["steps"][0]["ops"][1]["args"][0]["tensor"]["shape"] = [512, -1]
    with pytest.raises(TraceFormatError, match=r"steps\[0\]\.ops\[1\] \(aten::addmm\)\.args\[0\]"
                       r"\.tensor\.shape\[1\]: must be >= 0, got -1"):
        validate_trace(doc)
    doc = full_doc()
    doc["steps"][0]["ops"][1]["parent"] = 99
    with pytest.raises(TraceFormatError, match=r"parent: op id 99 not found in this step"):
        validate_trace(doc)


def test_non_finite_python_floats_are_refused() -> None:
    doc = full_doc()
    doc["steps"][0]["ops"][1]["args"][4]["float"] = math.inf
    with pytest.raises(TraceFormatError, match='write non-finite floats as "inf"'):
        validate_trace(doc)


def test_not_a_dict() -> None:
    with pytest.raises(TypeError, match="a trace document is a dict, got list"):
        validate_trace([])  # type: ignore[arg-type]


def test_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    save_trace(full_doc(), path)
    path.write_text(path.read_text()[:200])
    with pytest.raises(TraceFormatError) as info:
        load_trace(path)
    assert f"invalid habitat trace '{path}': not valid JSON (truncated or corrupt file?)" in str(
        info.value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format": "something-else"}, "not a habitat trace"),
        ({"version": 5}, "written by a newer Habitat (version 5)"),
        ({"origin": []}, "origin: expected an object, got array"),
    ],
)
def test_corrupt_files(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_corrupted(**changes)))
    with pytest.raises(TraceFormatError) as info:
        load_trace(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("")
    with pytest.raises(TraceFormatError, match="not valid JSON"):
        load_trace(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(FileNotFoundError) as info:
        load_trace(path)
    assert info.value.filename == str(path)
    assert "cannot read habitat trace" in str(info.value)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        load_trace(tmp_path)


def test_save_into_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "trace.json"
    with pytest.raises(FileNotFoundError, match="cannot write habitat trace"):
        save_trace(full_doc(), path)


def test_save_refuses_invalid_document_and_leaves_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    save_trace(full_doc(), path)
    before = path.read_text()
    with pytest.raises(TraceFormatError):
        save_trace(_corrupted(version=0), path)
    assert path.read_text() == before
