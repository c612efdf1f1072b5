"""Thin bridge to the C++ predictor: trace documents in, forecast documents out."""
from __future__ import annotations

import json
from typing import Any, Sequence

from habitat import _C

TRACE_FORMAT = "habitat-trace"
TRACE_VERSION = 1


def trace_document(origin: dict[str, Any], steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A trace document (docs/trace-format.md) holding `steps`."""
    return {"format": TRACE_FORMAT, "version": TRACE_VERSION, "origin": origin, "steps": list(steps)}


def forecast_step(origin: dict[str, Any], step: dict[str, Any], targets: Sequence[str]) -> dict[str, Any]:
    """Runs the engine on one step (a trace step dict) for each target GPU."""
    text = json.dumps(trace_document(origin, [step]), separators=(",", ":"))
    return json.loads(_C.forecast_step(text, list(targets), 0))
