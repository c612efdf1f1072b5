"""What is read from saved forecasts without loading them: the targets a saved forecast names,
and the per-step totals of a ``steps.jsonl`` step history."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from habitat.data.files import read_lines, read_tail, read_trace_text


def saved_targets(text: str) -> list[str] | None:
    """The targets a saved forecast names ("forecast": {"targets": [...]}, written after the
    trace by :meth:`Forecast.to_json`), found without parsing the whole document again."""
    at = text.rfind('"forecast"')
    if at < 0:
        return None
    try:  # the forecast section is the document's last key; parse just that part
        saved = json.loads("{" + text[at:])
    except ValueError:
        try:
            saved = json.loads(text)
        except ValueError:
            return None
    targets = saved.get("forecast", {}).get("targets") if isinstance(saved, dict) else None
    if not isinstance(targets, list):
        return None
    return [t for t in targets if isinstance(t, str)] or None


def saved_targets_of_file(path: str | Path, tail_bytes: int = 1 << 20) -> list[str] | None:
    """The targets a saved forecast file names, read from the end of the file (where
    :meth:`Forecast.to_json` writes its "forecast" section) when it is there, so a large trace
    is not read twice (a gzip-compressed one is decompressed holding only its tail); the whole
    file otherwise."""
    tail, whole = read_tail(path, tail_bytes)
    at = tail.rfind(b'"forecast"')
    if at >= 0:
        try:
            saved = json.loads(b"{" + tail[at:])
            targets = saved.get("forecast", {}).get("targets") if isinstance(saved, dict) else None
            if isinstance(targets, list):
                return [t for t in targets if isinstance(t, str)] or None
        except ValueError:
            pass
    if whole:
        return saved_targets(tail.decode("utf-8", errors="replace"))
    return saved_targets(read_trace_text(path))


def read_step_history(path: str | Path, run: str | None = None) -> list[dict[str, Any]]:
    """The per-step totals of a ``steps.jsonl`` history (``predict_on(..., log_dir=d)`` appends
    one line per step to ``d/steps.jsonl``), optionally of one run only. A last line cut short
    by a crash is skipped; every complete line is returned in file order."""
    rows = []
    for line in read_lines(path):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if run is None or row.get("run") == run:
            rows.append(row)
    return rows
