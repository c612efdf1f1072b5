"""The host-aware step time (timeline) re-forecast from the 16 committed GPU traces, on CPU.

Asserts the accuracy this model achieves today, with a small margin, so a change that makes
it worse fails; the numbers and how they are made: benchmarks/timeline/README.md. Issue 15's
target is every trace within 10% of its measured step on its own GPU: not met by 7 of 16
traces (listed in EXCEEDING), whose traced host times are inflated by more than Habitat's
recording (see the README).
"""
from __future__ import annotations

import pytest

from habitat.evaluate.timeline import Row, evaluate, host_difference, markdown, summary

# Error on the own GPU (%) achieved by the committed model, per trace.
ACHIEVED = {
    ("H100-SXM5-80GB", "dcgan_bf16"): 4.6, ("H100-SXM5-80GB", "dcgan_fp32"): 59.4,
    ("H100-SXM5-80GB", "gpt2_small_bf16"): -1.5, ("H100-SXM5-80GB", "gpt2_small_fp32"): -0.2,
    ("H100-SXM5-80GB", "lstm_seq2seq_bf16"): 17.1, ("H100-SXM5-80GB", "lstm_seq2seq_fp32"): 23.2,
    ("H100-SXM5-80GB", "resnet50_bf16"): -2.2, ("H100-SXM5-80GB", "resnet50_fp32"): 24.1,
    ("H200-SXM-141GB", "dcgan_bf16"): -2.0, ("H200-SXM-141GB", "dcgan_fp32"): -5.5,
    ("H200-SXM-141GB", "gpt2_small_bf16"): 61.7, ("H200-SXM-141GB", "gpt2_small_fp32"): -0.2,
    ("H200-SXM-141GB", "lstm_seq2seq_bf16"): 15.7, ("H200-SXM-141GB", "lstm_seq2seq_fp32"): 0.1,
    ("H200-SXM-141GB", "resnet50_bf16"): -3.2, ("H200-SXM-141GB", "resnet50_fp32"): 65.1,
}
EXCEEDING = {k for k, v in ACHIEVED.items() if abs(v) > 10}
MARGIN_POINTS = 3.0


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    rows = evaluate(cpu_proxy=False)
    print("\n" + markdown(rows) + "\n" + host_difference(rows))
    return rows


def test_every_recorded_trace_is_evaluated(rows: list[Row]) -> None:
    assert {(r.machine, r.workload) for r in rows} == set(ACHIEVED)


def test_own_gpu_errors_hold(rows: list[Row]) -> None:
    for r in rows:
        achieved = ACHIEVED[(r.machine, r.workload)]
        assert abs(r.own_error) <= abs(achieved) + MARGIN_POINTS, (r.machine, r.workload, r.own_error)
    s = summary(rows)
    print(f"own GPU: mean |error| {s['own_mean_abs_pct']:.1f}%, {s['own_within_10pct']}/16 within 10%; "
          f"over 10% (issue 15's target not met): {'; '.join(s['own_over_10pct'])}")
    assert s["own_mean_abs_pct"] <= 17.9 + 1.5
    assert s["own_within_10pct"] >= 16 - len(EXCEEDING)
    # The timeline is much closer than the kernel sum it replaces (38.9% mean before).
    assert s["own_mean_abs_pct"] < 0.6 * s["kernel_sum_mean_abs_pct"]


def test_device_bound_steps_stay_their_kernel_sum(rows: list[Row]) -> None:
    for r in rows:
        if not r.host_bound:
            assert r.step_ms == pytest.approx(r.kernel_sum_ms, rel=0.02)


def test_cross_gpu_errors_hold(rows: list[Row]) -> None:
    s = summary(rows)
    print(f"cross: {s['cross_mean_abs_pct']:.1f}% (origin host), {s['cross_ref_host_mean_abs_pct']:.1f}% "
          "(the other machine's host, its speed from the other workloads)")
    # Achieved 31.7% and 26.1%; issue 15's target (10% mean) is not met.
    assert s["cross_mean_abs_pct"] <= 31.7 + 5
    assert s["cross_ref_host_mean_abs_pct"] <= 26.1 + 5
    assert "host difference: the H200 machine's host took" in host_difference(rows)


def test_a_fixed_per_op_cost_is_evaluated_on_every_trace(rows: list[Row]) -> None:
    from habitat import _engine
    from habitat.evaluate.timeline import own_errors_with_constant

    fixed = own_errors_with_constant(_engine.DEFAULT_OVERHEAD_PER_OP_US)
    assert len(fixed) == len(rows) == 16
    # the per-step estimate of Habitat's own cost beats one constant for every step
    assert sum(abs(e) for e in fixed.values()) > sum(abs(r.own_error) for r in rows)
