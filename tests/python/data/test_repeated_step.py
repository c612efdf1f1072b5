"""A step that does the same work as the previous one reuses its per-op forecasts in the engine
(only its timeline is played again from its own host times): every number, timelines
included, must be what a process without the per-op memo (HABITAT_OP_MEMO=0) gives."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from subprocess_env import subprocess_env

SCRIPT = """
import json, sys
from habitat import _engine
from habitat.data.engine import (forecast_captured, forecast_step_parts, forecast_trace,
                                 host_model_json, trace_document, weights_dir)
doc = json.loads(open(sys.argv[1]).read())
targets = ["A100", "H100", "L4", "T4"]
out = []
# The trace parsed once, its steps forecast in turn (the memo sees each step after the last).
origin, steps = forecast_trace(json.dumps(doc), targets)
for capsule, index, wall_ms, summary, rows in steps:
    out.append([summary, bytes(rows._data).hex()])
# Each step on its own, then the captured steps again (predict_on's path).
for step in doc["steps"]:
    summary, rows = forecast_step_parts(doc["origin"], step, targets)
    out.append([summary, bytes(rows._data).hex()])
for capsule, *_ in steps:
    summary, rows = forecast_captured(capsule, origin, targets)
    out.append([summary, bytes(rows._data).hex()])
# The summary built in C++ is the engine's JSON document without its ops, key order included.
text = json.dumps(trace_document(doc["origin"], doc["steps"][-1:]))
whole = json.loads(_engine.forecast_step(text, targets, 0, weights_dir(), 1.0, host_model_json()))
del whole["ops"]
out.append(json.dumps(whole) == json.dumps(out[-1][0]))
print(json.dumps(out))
"""


def _run(trace: Path, memo: str) -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(trace)], capture_output=True, text=True,
                         env=subprocess_env(HABITAT_OP_MEMO=memo), timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _later(step: dict, index: int, scale: float) -> dict:
    """The same work with other host times: the next step of a training loop."""
    ops = []
    for op in step["ops"]:
        new = dict(op, start_us=op["start_us"] * scale, wall_us=op["wall_us"] * scale)
        new["kernels"] = [dict(k, launch_us=k["launch_us"] * scale) for k in op.get("kernels", [])]
        ops.append(new)
    return dict(step, index=index, wall_ms=step["wall_ms"] * scale, ops=ops)


def _on_a_gpu(doc: dict) -> None:
    """The golden (CPU) step as if traced on an H100: a measured kernel on every leaf op, launched
    halfway through it, so that its timeline reads the step's host times."""
    doc["origin"]["device"] = "H100"
    for i, op in enumerate(doc["steps"][0]["ops"]):
        if not op.get("has_children"):
            op["kernels"] = [{"name": "kernel", "grid": [64 + i % 3, 1, 1], "block": [128, 1, 1],
                              "duration_us": 5.0 + i % 4, "stream": 7 if i % 7 == 0 else 0,
                              "launch_us": op["start_us"] + op["wall_us"] / 2}]


def test_repeated_steps_match_forecasts_without_the_memo(golden_trace: Path, tmp_path: Path):
    doc = json.loads(golden_trace.read_text())
    doc.pop("forecast", None)
    _on_a_gpu(doc)
    first = doc["steps"][0]
    doc["steps"] = [_later(first, i, scale) for i, scale in enumerate([1.0, 1.5, 1.0, 0.7, 2.0])]
    trace = tmp_path / "repeated.json"
    trace.write_text(json.dumps(doc))
    with_memo, without = _run(trace, "1"), _run(trace, "0")
    assert with_memo == without  # every float through repr: bit-identical
    results = json.loads(with_memo)
    assert results[-1] is True
    step_ms = [r[0]["timelines"][0]["step_ms"] for r in results[:5]]
    assert len(set(step_ms)) > 1  # the timelines follow each step's own host times
    assert all(r[1] == results[0][1] for r in results[:-1])  # per-op rows: the same work
