"""The host-aware step time (timeline) re-forecast from the 16 committed GPU traces, on CPU.

Asserts the accuracy this model achieves today, with a small margin, so a change that makes
it worse fails; the numbers and how they are made: benchmarks/timeline/README.md. Issue 15's
target is every trace within 10% of its measured step on its own GPU: not met by 7 of 16
traces (listed in EXCEEDING), whose traced host times are inflated by more than Habitat's
recording (see the README).
"""
from __future__ import annotations

import pytest

from habitat.evaluate.timeline import LATER_RUNS, Row, evaluate, host_breakdown, host_difference, markdown, summary

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
# The format-2 traces of the later H100 run (h100-sxm5-80gb-2026-11-23): own-GPU error (%).
# As traced (Habitat's measured, hook and untimed per-op time and its edge syncs removed), the
# host is far too slow: +31% to +121% (66.4% mean abs.). Each of these traces carries the wall
# time of a later steady-state step of predict_on that recorded nothing, and the host cadence
# is calibrated to it (timeline_calibrate.cpp). Partly self-referential: for a host-bound step
# that wall is close to the measured step (a different measurement: one step's host wall in
# predict_on, not the benchmark's CUDA-event median), so these errors show the mechanism, not
# an independent accuracy (benchmarks/timeline/README.md).
ACHIEVED_FORMAT2_AS_TRACED = {
    "dcgan_bf16": 43.8, "dcgan_fp32": 105.2, "gpt2_small_bf16": 65.3, "gpt2_small_fp32": 0.0,
    "lstm_seq2seq_bf16": 73.8, "lstm_seq2seq_fp32": 31.1, "resnet50_bf16": 90.9, "resnet50_fp32": 120.8,
}
ACHIEVED_FORMAT2 = {
    "dcgan_bf16": 3.9, "dcgan_fp32": 7.8, "gpt2_small_bf16": 15.6, "gpt2_small_fp32": 0.0,
    "lstm_seq2seq_bf16": -4.4, "lstm_seq2seq_fp32": 9.4, "resnet50_bf16": 9.2, "resnet50_fp32": 21.7,
}
MARGIN_POINTS = 3.0


@pytest.fixture(scope="module")
def all_rows() -> list[Row]:
    rows = evaluate(cpu_proxy=False, later=True)
    print("\n" + markdown(rows) + "\n" + host_difference(rows) + "\n" + host_breakdown(rows))
    return rows


@pytest.fixture(scope="module")
def rows(all_rows: list[Row]) -> list[Row]:
    """The 16 format-1 traces."""
    return [r for r in all_rows if r.folder not in LATER_RUNS]


@pytest.fixture(scope="module")
def format2_rows(all_rows: list[Row]) -> list[Row]:
    return [r for r in all_rows if r.folder in LATER_RUNS]


def test_format2_traces_are_evaluated_with_habitats_time_removed(format2_rows: list[Row]) -> None:
    assert {r.workload for r in format2_rows} == set(ACHIEVED_FORMAT2)
    for r in format2_rows:
        assert r.trace_format == 2
        assert r.overhead_source == "measured+wrapper_ops", r.workload
        assert abs(r.uncalibrated_error) <= abs(ACHIEVED_FORMAT2_AS_TRACED[r.workload]) + MARGIN_POINTS, (
            r.workload, r.uncalibrated_error)
        # Habitat's time came out of the traced span, and the forecast's host is never below
        # the kernel-free minimum the trace allows (a positive host time).
        assert 0 < r.host_ms < r.traced_host_ms, r.workload
    assert summary(format2_rows)["later"]["own_uncalibrated_mean_abs_pct"] <= 66.4 + 2


def test_format2_host_is_calibrated_to_its_steady_state_step(format2_rows: list[Row]) -> None:
    for r in format2_rows:
        # The steady-state step's wall (no ops recorded) is shorter than the traced host after
        # Habitat's time is removed in every one: the cadence is scaled down, never up...
        assert 0.4 < r.host_scale < 1.0, (r.workload, r.host_scale)
        # ...until the origin's host takes that wall time (no syncs inside these steps).
        assert r.host_ms == pytest.approx(r.steady_wall_ms, rel=0.01), r.workload
        assert abs(r.own_error) <= abs(ACHIEVED_FORMAT2[r.workload]) + MARGIN_POINTS, (r.workload, r.own_error)
        assert abs(r.own_error) <= abs(r.uncalibrated_error) + 0.1, r.workload
    s = summary(format2_rows)["later"]
    assert s["own_mean_abs_pct"] <= 9.0 + 2
    assert s["calibrated_traces"] == 8
    # The real test of the calibrated host: the other GPU (the H200's format-1 run, its own
    # slower host), achieved 26.5% (origin host) and 26.6% (host speed from format-1 pairs).
    assert s["cross_mean_abs_pct"] <= 26.5 + 3
    assert s["cross_ref_host_mean_abs_pct"] <= 26.6 + 3


def test_format1_traces_have_no_uninstrumented_time_to_calibrate_to(rows: list[Row]) -> None:
    # Their step wall time is the traced step's own (it ends after its last op): no calibration.
    for r in rows:
        assert r.host_scale == 1.0, (r.machine, r.workload)
        assert r.uncalibrated_ms == r.step_ms


def test_habitats_edge_syncs_no_longer_serialise_a_device_bound_step(format2_rows: list[Row]) -> None:
    gpt2 = next(r for r in format2_rows if r.workload == "gpt2_small_fp32")
    assert not gpt2.host_bound
    assert gpt2.step_ms == pytest.approx(gpt2.kernel_sum_ms, rel=0.01)


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
