"""Habitat trace documents: the JSON a capture writes, one file per run.

The format is described in docs/trace-format.md. Validation is the engine's own C++ reader,
so a document accepted here is exactly one the predictor accepts. Documents are plain dicts
in their canonical form: fields equal to their defaults are left out.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, Union

from habitat import _engine
from habitat.data.files import atomic_write_text, is_gzip, read_trace_text

__all__ = ["FORMAT_VERSION", "TraceFormatError", "load_trace", "save_trace", "tensor_args",
           "trace_document_dict", "validate_trace"]

#: Raised for a document that is not a valid habitat trace; a subclass of ValueError.
TraceFormatError = _engine.TraceFormatError
#: The newest trace format version this build reads and the one it writes.
FORMAT_VERSION: int = _engine.TRACE_FORMAT_VERSION

PathLike = Union[str, "os.PathLike[str]"]
TraceDocument = dict[str, Any]


def tensor_args(op: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(argument name, tensor metadata) of each tensor among an op's arguments, in order: an
    argument holds one tensor (``"tensor"``), a list of them (``"tensors"``, e.g. torch.cat's
    inputs) or none. Undefined tensors (``{"defined": false}``) are yielded too.
    The one place that knows how a trace op stores its tensors (docs/trace-format.md)."""
    for arg in op.get("args", ()):
        name = arg.get("name", "")
        if "tensor" in arg:
            yield name, arg["tensor"]
        for meta in arg.get("tensors", ()):
            yield name, meta


def validate_trace(doc: Mapping[str, Any]) -> TraceDocument:
    """Check a trace document and return it in canonical form.

    Raises TraceFormatError naming the first invalid field, e.g.
    ``steps[0].ops[3] (aten::mm).args[0].tensor.shape[1]: must be >= 0, got -1``.
    Keys the format does not define (such as a report's ``"forecast"``) are dropped.
    """
    return json.loads(_engine.validate_trace_doc(trace_document_dict(doc)))


def load_trace(path: PathLike) -> TraceDocument:
    """Read and validate the trace file at ``path``.

    Raises OSError (FileNotFoundError, PermissionError, ...) when the file cannot be read and
    TraceFormatError when it is not a valid trace, including one written by a newer Habitat.
    A gzip-compressed trace (``trace.json.gz``) is read too.
    """
    if is_gzip(path):
        return json.loads(_engine.validate_trace_json(read_trace_text(path)))
    return json.loads(_engine.load_trace(os.fspath(path)))


def save_trace(doc: Mapping[str, Any], path: PathLike) -> None:
    """Validate ``doc`` and write it to ``path`` in canonical form.

    The file is replaced atomically (a temporary file in the same directory, fsynced, then
    renamed over ``path``), so a reader, a crash or a full disk never leaves half a trace.
    """
    text = _engine.validate_trace_doc(trace_document_dict(doc))  # an invalid document leaves the file alone
    try:
        atomic_write_text(path, text)
    except OSError as e:
        raise OSError(e.errno, f"cannot write habitat trace '{os.fspath(path)}': "
                      f"{e.strerror or e}") from None


def trace_document_dict(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A trace document as the dict the engine reads without JSON text (habitat._engine walks
    dicts, lists, str, int, float, bool and None as json.dumps would write them, and raises
    TraceFormatError naming any other value)."""
    if isinstance(doc, dict):
        return doc
    if not isinstance(doc, Mapping):
        raise TypeError(f"a trace document is a dict, got {type(doc).__name__}")
    return dict(doc)
