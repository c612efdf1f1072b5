"""benchmarks/accuracy/multi_tensor_kernels.py: a multi-tensor row's step made from a template
trace (a distinct prime per tensor, rewritten) is the step the CPU records when it runs the row's
own case at the row's list, op for op; the engine forecasts it."""
from __future__ import annotations

from typing import Any

import pytest
from bench_scripts import loaded_script, without_run_fields

# 12 tensors: two past a chunk, one of 11 elements (a template prime), and one of 1 (a size-1
# tensor takes other view ops in clip_grad_norm_'s trace: the same kernels, compared by forecast).
SIZES = [300, 3, 7, 2, 70000, 12, 5, 64, 2, 9, 131072, 11]
WITH_ONE = SIZES[:3] + [1] + SIZES[4:]


@pytest.fixture(scope="module")
def mt():
    with loaded_script("benchmarks/accuracy/multi_tensor_kernels.py", "multi_tensor_kernels") as module:
        yield module


CASES = [("adamw", "adamw", "foreach", "fp32"), ("adamw", "adamw", "fused", "bf16"),
         ("multitensor", "sgd", "foreach", "bf16"), ("multitensor", "sgd", "fused", "fp32"),
         ("multitensor", "amp_unscale", "foreach", "fp32"), ("multitensor", "clip_grad_norm", "foreach", "fp32")]


def _row(stem: str, op: str, impl: str, precision: str, sizes: list[int]) -> dict[str, Any]:
    return {"stem": stem, "op": op, "impl": impl, "precision": precision, "sizes": sizes, "us": 1.0, "held": False}


def _traced(mt, row: dict[str, Any]) -> list[dict[str, Any]]:
    from habitat.capture.record import record_step

    run = mt._case(row, row["sizes"])
    with record_step(0) as rec:
        run()
    return rec.step["ops"]


@pytest.mark.parametrize("case", CASES, ids=["-".join(c[1:]) for c in CASES])
def test_a_templated_step_is_the_step_traced_at_the_rows_list(mt, case) -> None:
    row = _row(*case, SIZES)
    assert without_run_fields(mt.Templates().step_ops(row)) == without_run_fields(_traced(mt, row))


@pytest.mark.parametrize("case", CASES, ids=["-".join(c[1:]) for c in CASES])
def test_a_templated_step_forecasts_as_the_step_traced_at_the_rows_list(mt, case) -> None:
    row = _row(*case, WITH_ONE)
    templated, traced = mt.forecast_steps([mt.Templates().step_ops(row), _traced(mt, row)], "H100-SXM5-80GB")
    assert templated > 0 and templated == pytest.approx(traced, rel=1e-12)


def test_template_primes_are_distinct_and_past_the_small_sizes(mt) -> None:
    p = mt.primes(600)
    assert len(set(p)) == 600 and p[0] == 11 and all(all(x % q for q in range(2, x)) for x in p[:50])
