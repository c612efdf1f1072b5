"""What is read from saved forecasts without loading them: the targets a saved forecast names,
and the per-step totals of a ``steps.jsonl`` step history. Every read is bounded
(:mod:`habitat.data.input_files`): JSON nested deeper than the engine's cap is refused, not a
RecursionError."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from habitat.data.files import read_input_bytes, read_lines, read_tail
from habitat.data.input_files import loads_json


def _targets_in(saved: Any) -> list[str] | None:
    targets = saved.get("forecast", {}).get("targets") if isinstance(saved, dict) else None
    if not isinstance(targets, list):
        return None
    return [t for t in targets if isinstance(t, str)] or None


def saved_targets(text: str | bytes | bytearray) -> list[str] | None:
    """The targets a saved forecast names ("forecast": {"targets": [...]}, written after the
    trace by :meth:`Forecast.to_json`), found without parsing the whole document again."""
    data = text.encode() if isinstance(text, str) else text
    at = data.rfind(b'"forecast"')
    if at < 0:
        return None
    try:  # the forecast section is the document's last key; parse just that part
        return _targets_in(loads_json(b"{" + data[at:], "the saved forecast"))
    except ValueError:
        try:
            return _targets_in(loads_json(data, "the saved forecast"))
        except ValueError:
            return None


def saved_targets_of_file(path: str | Path, tail_bytes: int = 1 << 20) -> list[str] | None:
    """The targets a saved forecast file names, read from the end of the file (where
    :meth:`Forecast.to_json` writes its "forecast" section) when it is there, so a large trace
    is not read twice (a gzip-compressed one is decompressed holding only its tail); the whole
    file otherwise. Raises ValueError for a section nested past the cap."""
    tail, whole = read_tail(path, tail_bytes)
    at = tail.rfind(b'"forecast"')
    if at >= 0:
        try:
            targets = _targets_in(loads_json(b"{" + tail[at:], f"trace '{path}'"))
            if targets is not None:
                return targets
        except ValueError as e:
            if "nested more than" in str(e):
                raise
    return saved_targets(tail if whole else read_input_bytes(path))


def read_step_history(path: str | Path, run: str | None = None) -> list[dict[str, Any]]:
    """The per-step totals of a ``steps.jsonl`` history (``predict_on(..., log_dir=d)`` appends
    one line per step to ``d/steps.jsonl``), optionally of one run only. A last line cut short
    by a crash, or a damaged one, is skipped; every complete line is returned in file order."""
    rows = []
    for line in read_lines(path):
        try:
            row = loads_json(line, "steps.jsonl")
        except ValueError:
            continue
        if isinstance(row, dict) and (run is None or row.get("run") == run):
            rows.append(row)
    return rows
