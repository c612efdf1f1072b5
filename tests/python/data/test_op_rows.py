"""The engine's per-op rows (columns) hold exactly what its JSON ops array holds."""
from __future__ import annotations

import json
from pathlib import Path

from habitat import _engine
from habitat.data.engine import forecast_step_parts, weights_dir
from habitat.data.forecast import Forecast
from habitat.data.op_rows import METHODS


def test_rows_equal_the_engine_json(golden_trace: Path):
    doc = json.loads(golden_trace.read_text())
    targets = ["A100", "H100", "L4"]
    text = json.dumps({k: v for k, v in doc.items() if k != "forecast"} | {"steps": doc["steps"][:1]})
    reference = json.loads(_engine.forecast_step(text, targets, 0, weights_dir()))
    summary, rows = forecast_step_parts(doc["origin"], doc["steps"][0], targets)
    assert rows.records() == reference["ops"]  # every float bit for bit, names decoded
    assert summary["totals"] == reference["totals"] and summary["targets"] == reference["targets"]
    a = rows.array
    assert len(a) == len(rows) == len(doc["steps"][0]["ops"])
    assert a["time_us"].shape == (len(a), 3) and METHODS[a["method"][0, 0]]


def test_op_table_reads_columns_without_the_trace(golden_trace: Path):
    forecast = Forecast.load(golden_trace)
    step = forecast.latest
    table = step.op_table
    assert table is not None and step._detail is not None  # the step's trace was not decoded
    shares = table.array["share_us"]
    for t, target in enumerate(step.targets):  # the shares add up to the totals
        assert abs(shares[:, t].sum() / 1000 - step.total_ms[target]) <= 1e-9 * step.total_ms[target]
    assert [op.id for op in step.ops] == table.array["id"].tolist()
