"""The step as seen from a detailed step alone (no host calibration), replayed on CPU from every
recorded format-2 GPU trace (issue 31; habitat.evaluate.uncalibrated, the table in
benchmarks/results/timeline-uncalibrated.md).

Asserts the figures the committed model gives, with a small margin, so a change that makes
them worse fails, and states issue 31's targets beside them: the uncalibrated step within 10%
of the measured untraced step on average and 20% each, the calibrated one within 10% each, and
a device-bound verdict where the measured kernels sum to the measured step. The 2026-11-23/-26
H100 traces do not meet the uncalibrated targets: they carry neither CUPTI's measured cost per
launch nor a detailed step recorded with the forecast worker idle (benchmarks/timeline/README.md,
"The first detailed step"). The H200 first-step traces (2026-11-27, two runs; 2026-11-28, two
more) carry both; what they meet and what not is in the READMEs of
benchmarks/results/first-step-H200-SXM-141GB-2026-11-27/ and -2026-11-28/.
"""
from __future__ import annotations

import pytest

from habitat.evaluate.uncalibrated import FORMAT2_RUNS, Row, evaluate, host_breakdown, markdown, summary

H200_RUN1 = "first-step-H200-SXM-141GB-2026-11-27/run1"
H200_RUN2 = "first-step-H200-SXM-141GB-2026-11-27/run2"
H200_RUN3 = "first-step-H200-SXM-141GB-2026-11-28/run1"
H200_RUN4 = "first-step-H200-SXM-141GB-2026-11-28/run2"
#: Traces with CUPTI's measured cost per launch, saved right after predict_on's detailed steps.
FIRST_STEP_RUNS = (H200_RUN1, H200_RUN2, H200_RUN3, H200_RUN4)
# (run, workload) -> (uncalibrated, calibrated) error (%) of the committed model.
ACHIEVED = {
    ("h100-sxm5-80gb-2026-11-23", "dcgan_bf16"): (43.8, 3.9),
    ("h100-sxm5-80gb-2026-11-23", "dcgan_fp32"): (105.2, 7.8),
    ("h100-sxm5-80gb-2026-11-23", "gpt2_small_bf16"): (65.3, 15.6),
    ("h100-sxm5-80gb-2026-11-23", "gpt2_small_fp32"): (-1.1, -1.1),
    ("h100-sxm5-80gb-2026-11-23", "lstm_seq2seq_bf16"): (73.8, -4.4),
    ("h100-sxm5-80gb-2026-11-23", "lstm_seq2seq_fp32"): (31.1, 9.4),
    ("h100-sxm5-80gb-2026-11-23", "resnet50_bf16"): (90.9, 9.2),
    ("h100-sxm5-80gb-2026-11-23", "resnet50_fp32"): (120.8, 21.7),
    ("h100-sxm5-80gb-2026-11-26", "dcgan_bf16"): (28.6, -6.5),
    ("h100-sxm5-80gb-2026-11-26", "dcgan_fp32"): (26.7, -6.1),
    ("h100-sxm5-80gb-2026-11-26", "gpt2_small_bf16"): (28.2, 7.3),
    ("h100-sxm5-80gb-2026-11-26", "gpt2_small_fp32"): (-1.1, -1.1),
    ("h100-sxm5-80gb-2026-11-26", "lstm_seq2seq_bf16"): (22.4, -5.0),
    ("h100-sxm5-80gb-2026-11-26", "lstm_seq2seq_fp32"): (18.7, 0.1),
    ("h100-sxm5-80gb-2026-11-26", "resnet50_bf16"): (126.4, 67.2),
    ("h100-sxm5-80gb-2026-11-26", "resnet50_fp32"): (-2.7, -2.7),
    # No steady-state wall in these traces: calibrated is uncalibrated (test_first_step_traces_as_they_stand).
    # Device-bound steps 1-3 points under since AdamW's CPU step-counter ops launch nothing
    # (their 2 us "kernels" had filled the launch gaps: ResNet-50 fp32's forecast kernel sum
    # 32.4 -> 31.6 ms, CUPTI's 31.59).
    (H200_RUN1, "bert_base_bf16"): (21.4, 21.4),
    (H200_RUN1, "resnet50_adamw_bf16"): (10.0, 10.0),
    (H200_RUN1, "resnet50_adamw_fp32"): (-3.0, -3.0),
    (H200_RUN1, "t5_small_fp32"): (-3.3, -3.3),
    (H200_RUN2, "bert_base_bf16"): (-1.4, -1.4),
    (H200_RUN2, "resnet50_adamw_bf16"): (-8.0, -8.0),
    (H200_RUN2, "resnet50_adamw_fp32"): (-3.7, -3.7),
    (H200_RUN2, "t5_small_fp32"): (-3.8, -3.8),
    (H200_RUN3, "bert_base_bf16"): (28.4, 28.4),
    (H200_RUN3, "resnet50_adamw_bf16"): (23.4, 23.4),
    (H200_RUN3, "resnet50_adamw_fp32"): (-2.8, -2.8),
    (H200_RUN3, "t5_small_fp32"): (6.8, 6.8),
    (H200_RUN4, "bert_base_bf16"): (19.3, 19.3),
    (H200_RUN4, "resnet50_adamw_bf16"): (17.2, 17.2),
    (H200_RUN4, "resnet50_adamw_fp32"): (-2.3, -2.3),
    (H200_RUN4, "t5_small_fp32"): (-5.1, -5.1),
}
MARGIN_POINTS = 2.0


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    rows = evaluate()
    print("\n" + markdown(rows) + "\n\n" + host_breakdown(rows))
    return rows


def test_every_recorded_format2_trace_is_replayed(rows: list[Row]) -> None:
    assert {(r.run, r.workload) for r in rows} == set(ACHIEVED)
    assert {r.run for r in rows} == set(FORMAT2_RUNS)


def test_uncalibrated_and_calibrated_errors_hold(rows: list[Row]) -> None:
    for r in rows:
        uncalibrated, calibrated = ACHIEVED[(r.run, r.workload)]
        assert abs(r.uncalibrated_error) <= abs(uncalibrated) + MARGIN_POINTS, (r.run, r.workload, r.uncalibrated_error)
        assert abs(r.calibrated_error) <= abs(calibrated) + MARGIN_POINTS, (r.run, r.workload, r.calibrated_error)
        # The calibration only scales the host down, to an untraced step's wall, and the
        # uncalibrated step is reported beside it.
        assert r.host_scale <= 1.0 and r.calibrated_ms <= r.uncalibrated_ms + 1e-6


def test_issue_31_targets_as_they_stand(rows: list[Row]) -> None:
    """The targets, with what the recorded traces give today (not met: see the module doc)."""
    s = summary(rows)["all"]
    assert s["traces"] == 32
    assert s["uncalibrated_mean_abs_pct"] <= 29.6 + 1.0  # target 10
    assert s["uncalibrated_within_20pct"] >= 17         # target 32
    assert s["calibrated_traces"] == 16                 # the H100 traces: a steady-state wall
    assert s["calibrated_within_10pct"] >= 13           # target 16
    late = summary(rows)["h100-sxm5-80gb-2026-11-26"]   # after the worker stopped decoding steps
    assert late["uncalibrated_mean_abs_pct"] <= 31.7 + 1.0


def test_first_step_traces_as_they_stand(rows: list[Row]) -> None:
    """The H200 traces carry CUPTI's measured cost per launch and a detailed step recorded with
    the worker idle. 2026-11-27 run 2 meets the uncalibrated targets (10% mean, 20% each); run 1
    meets the mean but not 20% each: BERT bf16, whose host ran about 1.5x slower during that step
    than in run 2, and whose untraced bursts spread from 31 to 59 ms around it. On 2026-11-28 the
    host-bound bf16 steps come out 17-28% over in both runs (the host left after removal is
    7-10 us per launch over the untraced step) and the untraced steps themselves moved by up to
    41% between the runs five minutes apart (ResNet-50 bf16 30.1 -> 42.5 ms): run 2 meets
    20% each but not the mean, run 1 neither (the folders' READMEs)."""
    by_run = summary(rows)
    run1, run2, run3, run4 = (by_run[run] for run in FIRST_STEP_RUNS)
    assert run2["uncalibrated_mean_abs_pct"] <= 10 and run2["uncalibrated_within_20pct"] == 4
    assert run1["uncalibrated_mean_abs_pct"] <= 10 and run1["uncalibrated_within_20pct"] == 3
    assert run3["uncalibrated_mean_abs_pct"] <= 15.4 + 1.0 and run3["uncalibrated_within_20pct"] == 2
    assert run4["uncalibrated_mean_abs_pct"] <= 11.0 + 1.0 and run4["uncalibrated_within_20pct"] == 4
    # Saved right after the detailed steps: the trace's wall is the traced step's own, so the
    # engine has no steady-state wall to calibrate to.
    assert all(by_run[run]["calibrated_traces"] == 0 for run in FIRST_STEP_RUNS)
    for r in rows:
        if r.run in FIRST_STEP_RUNS:
            assert r.steady_wall_ms == 0 and r.host_scale == 1.0
            assert r.calibrated_ms == pytest.approx(r.uncalibrated_ms)


def test_device_bound_steps_by_measurement(rows: list[Row]) -> None:
    """Where the measured kernels sum to the measured step, the uncalibrated verdict is
    device-bound, but for two traces (issue 31's rule, not met there):
    - 2026-11-23 resnet50 fp32, whose host was stalled 28 ms by the worker's decode (the worker
      no longer decodes);
    - H200 run 1 resnet50_adamw bf16: kernels 28.8 ms against 29.3 measured, but the traced
      host, with Habitat's and CUPTI's measured time removed, is 32.2 ms (run 2's: 28.2), GPU
      busy 89% against the verdict's 90%: that step's host ran slower in every phase (its span
      +3.7 ms, the capture's own timed work +11%) and CUPTI's start-up probe gave 2.85 us per
      launch against run 2's 3.99 (1.1 ms less removed). The folder's README has the figures;
    - H200 2026-11-28 run 1 t5_small fp32: kernels 47.9 ms against 50.2 measured (4.6%), the
      host after removal 53.6 ms, GPU busy 89%: the same slow host as that run's bf16 steps."""
    measured = {(r.run, r.workload) for r in rows if r.device_bound_measured}
    h100 = [run for run in FORMAT2_RUNS if run.startswith("h100")]
    assert measured == ({(run, w) for run in h100 for w in ("gpt2_small_fp32", "resnet50_fp32")}
                        | {(run, w) for run in FIRST_STEP_RUNS for w in ("resnet50_adamw_fp32", "t5_small_fp32")}
                        | {(H200_RUN1, "resnet50_adamw_bf16"), (H200_RUN3, "t5_small_fp32")}) - {(H200_RUN4, "t5_small_fp32")}
    wrong = {(r.run, r.workload) for r in rows if r.device_bound_measured and r.host_bound}
    assert wrong == {("h100-sxm5-80gb-2026-11-23", "resnet50_fp32"), (H200_RUN1, "resnet50_adamw_bf16"),
                     (H200_RUN3, "t5_small_fp32")}
    for r in rows:
        if r.device_bound_measured and not r.host_bound:
            assert r.gpu_busy >= 0.95 and abs(r.uncalibrated_error) <= 5


def test_the_host_breakdown_accounts_for_the_traced_span(rows: list[Row]) -> None:
    for r in rows:
        removed = r.recorded_ms + r.before_ms + r.other_removed_ms + r.cupti_removed_ms
        assert r.recorded_ms > 0 and r.before_ms > 0 and r.other_removed_ms > 0
        assert 0 < removed < r.traced_span_ms
        if r.run in FIRST_STEP_RUNS:  # CUPTI's cost per launch, measured at start-up, taken out
            assert 2.0 <= r.launch_overhead_us <= 6.5  # 2.5-4.7 us, 5.7-5.9 before ResNet-50 fp32
            assert r.cupti_removed_ms == pytest.approx(r.launch_overhead_us * r.launches / 1000.0, rel=0.01)
        else:  # the H100 traces predate the measurement
            assert r.launch_overhead_us == 0 and r.cupti_removed_ms == 0
