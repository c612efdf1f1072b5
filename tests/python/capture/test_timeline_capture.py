"""Timeline fields the capture records (trace format 2): Habitat's own time per op and in
module hooks, so a forecast can take them out of the traced host cadence."""
from __future__ import annotations

import torch
from torch import nn

from habitat.capture.predict import record_step


def test_each_op_records_habitat_own_time() -> None:
    a = torch.randn(64, 64)
    with record_step() as rec:
        torch.nn.functional.linear(a, a, a[0])
    step = rec.step
    assert step is not None and step["ops"]
    for op in step["ops"]:
        assert op["overhead_us"] >= 0, op["name"]
    assert sum(op["overhead_us"] for op in step["ops"]) > 0


def test_module_hooks_time_is_recorded_per_step() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(4, 8)
    with record_step() as rec:
        model(x).sum().backward()
    step = rec.step
    assert step is not None
    assert step["hook_overhead_us"] > 0
    # Recorded as a fraction of the step, not more than it.
    assert step["hook_overhead_us"] < step["wall_ms"] * 1000


def test_module_hook_time_is_placed_before_the_next_op() -> None:
    """The hooks' time is also handed to the op recorded next on the thread (own_before_us),
    so the timeline removes it where it was spent; a step's total stays within its hooks'
    and commits' time."""
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(4, 8)
    with record_step() as rec:
        model(x).sum().backward()
    step = rec.step
    assert step is not None and step["ops"]
    assert all(op["own_before_us"] >= 0 for op in step["ops"])
    # Three module calls ran hooks before the forward's ops: some op took their time.
    assert sum(op["own_before_us"] for op in step["ops"]) >= step["hook_overhead_us"] > 0
    assert sum(op["own_before_us"] for op in step["ops"]) < step["wall_ms"] * 1000


def test_a_cpu_step_replayed_loses_habitats_time() -> None:
    """A CPU step traced by predict_on, replayed as an origin's op times (as
    benchmarks/timeline/cpu_replay.py does to compare it with the plain step): Habitat's own
    time comes out of the cadence, placed where it was spent, and the forecast says how."""
    import habitat
    from habitat.data import engine
    from habitat.data.forecast import Forecast

    gpu = "H100-SXM5-80GB"
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(16, 16), nn.ReLU())])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 16)
    predictor = habitat.predict_on(gpu, detail_steps=1)
    with predictor as forecast:
        model(x).square().mean().backward()
        opt.step()
    predictor.close()
    trace = forecast.latest.trace
    doc = engine.trace_document(dict(forecast.origin, device=gpu), [trace])
    timeline = Forecast.from_trace(doc, [gpu]).latest.timeline[gpu]
    span_ms = max(op["start_us"] + op["wall_us"] for op in trace["ops"]) / 1000
    assert timeline["overhead_source"] in ("measured", "measured+wrapper_ops")
    assert 0 < timeline["host_ms"] < span_ms
    assert timeline["overhead_removed_ms"] >= sum(op["overhead_us"] for op in trace["ops"]) / 1000
    assert any("module hooks where they ran" in note for note in timeline["notes"])
