"""Printing a forecast and reading its top ops build objects for those ops only, not for every
op of the step (a step of a million ops printed in well under a second, not minutes)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from habitat.analysis.regions import compiled_regions
from habitat.data.forecast import Forecast, StepText


def _reference_top(step, target: str, n: int):  # noqa: ANN001, ANN202
    """The object-per-op way: every op built, the counted ones sorted by share."""
    counted = [op for op in step.ops if op.predictions[target].share_us > 0]
    return sorted(counted, key=lambda op: op.predictions[target].share_us, reverse=True)[:n]


def test_top_ops_from_the_columns_equal_the_object_per_op_ones(golden_trace: Path):
    for n in (0, 1, 10, 10_000):
        fresh = Forecast.load(golden_trace, targets=["A100", "T4"])
        built = Forecast.load(golden_trace, targets=["A100", "T4"])
        for target in fresh.targets:
            top = fresh.latest.top_ops(target, n)
            assert fresh.latest._ops == []  # only the chosen ops became objects
            assert top == _reference_top(built.latest, target, n)  # same ops, order and values


def test_print_builds_no_object_per_op(golden_trace: Path):
    forecast = Forecast.load(golden_trace, targets=["A100", "H100"])
    text = str(forecast)
    assert "A100" in text and forecast.latest.op_count() == 189
    # no object per op (and a loaded step's trace not even decoded: only the printed ops)
    assert forecast.latest._ops == [] and forecast.latest._trace is None
    # the top ops printed are those of the object-per-op path
    reference = Forecast.load(golden_trace, targets=["A100"])
    for op in _reference_top(reference.latest, reference.targets[0], 3):
        assert op.full_name in text


def test_compiled_regions_build_only_the_ops_inside_them(golden_trace: Path):
    doc = json.loads(golden_trace.read_text())
    step = copy.deepcopy(doc["steps"][-1])
    inside = [op["id"] for op in step["ops"][10:40]]
    for op in step["ops"][10:40]:
        op["module_path"] = "compiled/graph_3"
    forecast = Forecast(["A100"], doc["origin"])
    forecast.add_step(step)
    a100 = forecast.targets[0]
    regions = compiled_regions(forecast.latest, a100)
    assert forecast.latest._ops == []
    # the region's time: each op inside once, an op whose parent is inside too counted in it
    ops = {op.id: op for op in forecast.latest.ops}
    expected = sum(ops[i].time_us(a100) for i in inside
                   if ops[i].parent is None or ops[i].parent not in inside)
    assert [r.graph_id for r in regions] == [3]
    assert abs(regions[0].time_us - expected) <= 1e-9 * expected


def _printed_both_ways(doc: dict, targets: list[str]) -> tuple[str, str, Forecast]:
    """(print of a loaded step whose trace was never decoded, print after decoding it, the
    first forecast)."""
    fresh = Forecast.from_trace(copy.deepcopy(doc), targets)
    decoded = Forecast.from_trace(copy.deepcopy(doc), targets)
    assert decoded.latest.trace is not None and decoded.latest.text_view() is None
    return str(fresh), str(decoded), fresh


def test_print_of_a_loaded_step_decodes_only_the_printed_ops(golden_trace: Path):
    doc = json.loads(golden_trace.read_text())
    # one larger step: the last step's ops four times over, with fresh ids
    step = copy.deepcopy(doc["steps"][-1])
    block, top = step["ops"], max(op["id"] for op in step["ops"]) + 1
    step["ops"] = [{**op, "id": op["id"] + k * top,
                    **({"parent": op["parent"] + k * top} if op.get("parent") is not None else {})}
                   for k in range(4) for op in block]
    doc["steps"] = [step]
    fast, reference, forecast = _printed_both_ways(doc, ["A100", "T4"])
    assert fast == reference and "Top ops on " in fast  # on the fastest GPU as seen
    latest = forecast.latest
    assert latest._trace is None and latest._ops == []  # never decoded, no object per op
    text = latest.text_view()
    assert text is not None and not text.contains("compiled/graph_")
    assert text.top_ops("T4", 7) == latest.top_ops("T4", 7)


def test_print_of_a_loaded_step_with_compiled_regions_and_ids_found_once(golden_trace: Path):
    doc = json.loads(golden_trace.read_text())
    step = copy.deepcopy(doc["steps"][-1])
    for op in step["ops"][10:40]:
        op["module_path"] = "compiled/graph_3"
    doc["steps"] = [step]
    fast, reference, _ = _printed_both_ways(doc, ["A100"])
    assert fast == reference and "Compiled regions on A100" in fast
    # an id the text names twice (the engine rejects repeated op ids, but a nested object
    # could read alike): not guessed, the caller decodes the step
    text = StepText(b'{"steps":[{"ops":[{"id":7,"name":"a"},{"id":8,"name":"b","x":{"id":7,"y":1}}]}]}',
                    None, None)  # type: ignore[arg-type]
    assert text.op_dict(7) is None and text.op_dict(9) is None
    assert text.op_dict(8) == {"id": 8, "name": "b", "x": {"id": 7, "y": 1}}
