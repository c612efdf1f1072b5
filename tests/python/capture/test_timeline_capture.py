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
