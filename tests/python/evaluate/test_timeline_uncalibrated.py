"""The step as seen from a detailed step alone (no host calibration), replayed on CPU from every
recorded format-2 GPU trace (issue 31; habitat.evaluate.uncalibrated, the table in
benchmarks/results/timeline-uncalibrated.md).

Asserts the figures the committed model gives, with a small margin, so a change that makes
them worse fails, and states issue 31's targets beside them: the uncalibrated step within 10%
of the measured untraced step on average and 20% each, the calibrated one within 10% each, and
a device-bound verdict where the measured kernels sum to the measured step. The recorded traces
do not meet the uncalibrated targets: they carry neither CUPTI's measured cost per launch nor a
detailed step recorded with the forecast worker idle (benchmarks/timeline/README.md, "The first
detailed step"); the capture records the first since, and predict_on no longer forecasts
while a detailed step records.
"""
from __future__ import annotations

import pytest

from habitat.evaluate.uncalibrated import FORMAT2_RUNS, Row, evaluate, host_breakdown, markdown, summary

# (run, workload) -> (uncalibrated, calibrated) error (%) of the committed model.
ACHIEVED = {
    ("h100-sxm5-80gb-2026-11-23", "dcgan_bf16"): (43.8, 3.9),
    ("h100-sxm5-80gb-2026-11-23", "dcgan_fp32"): (105.2, 7.8),
    ("h100-sxm5-80gb-2026-11-23", "gpt2_small_bf16"): (65.3, 15.6),
    ("h100-sxm5-80gb-2026-11-23", "gpt2_small_fp32"): (0.0, 0.0),
    ("h100-sxm5-80gb-2026-11-23", "lstm_seq2seq_bf16"): (73.8, -4.4),
    ("h100-sxm5-80gb-2026-11-23", "lstm_seq2seq_fp32"): (31.1, 9.4),
    ("h100-sxm5-80gb-2026-11-23", "resnet50_bf16"): (90.9, 9.2),
    ("h100-sxm5-80gb-2026-11-23", "resnet50_fp32"): (120.8, 21.7),
    ("h100-sxm5-80gb-2026-11-26", "dcgan_bf16"): (28.6, -6.5),
    ("h100-sxm5-80gb-2026-11-26", "dcgan_fp32"): (26.7, -6.1),
    ("h100-sxm5-80gb-2026-11-26", "gpt2_small_bf16"): (28.2, 7.3),
    ("h100-sxm5-80gb-2026-11-26", "gpt2_small_fp32"): (0.0, 0.0),
    ("h100-sxm5-80gb-2026-11-26", "lstm_seq2seq_bf16"): (22.4, -5.0),
    ("h100-sxm5-80gb-2026-11-26", "lstm_seq2seq_fp32"): (18.7, 0.1),
    ("h100-sxm5-80gb-2026-11-26", "resnet50_bf16"): (126.4, 67.2),
    ("h100-sxm5-80gb-2026-11-26", "resnet50_fp32"): (-2.7, -2.7),
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
    assert s["traces"] == 16
    assert s["uncalibrated_mean_abs_pct"] <= 49.0 + 1.0  # target 10
    assert s["uncalibrated_within_20pct"] >= 4          # target 16
    assert s["calibrated_within_10pct"] >= 13           # target 16
    late = summary(rows)["h100-sxm5-80gb-2026-11-26"]   # after the worker stopped decoding steps
    assert late["uncalibrated_mean_abs_pct"] <= 31.7 + 1.0


def test_device_bound_steps_by_measurement(rows: list[Row]) -> None:
    """Where the measured kernels sum to the measured step, the uncalibrated verdict is
    device-bound, but for the one trace whose host was stalled 28 ms by the worker's decode
    (2026-11-23 resnet50 fp32; the worker no longer decodes)."""
    measured = {(r.run, r.workload) for r in rows if r.device_bound_measured}
    assert measured == {(run, w) for run in FORMAT2_RUNS for w in ("gpt2_small_fp32", "resnet50_fp32")}
    wrong = {(r.run, r.workload) for r in rows if r.device_bound_measured and r.host_bound}
    assert wrong <= {("h100-sxm5-80gb-2026-11-23", "resnet50_fp32")}
    for r in rows:
        if r.device_bound_measured and not r.host_bound:
            assert r.gpu_busy >= 0.95 and abs(r.uncalibrated_error) <= 5


def test_the_host_breakdown_accounts_for_the_traced_span(rows: list[Row]) -> None:
    for r in rows:
        removed = r.recorded_ms + r.before_ms + r.other_removed_ms + r.cupti_removed_ms
        assert r.recorded_ms > 0 and r.before_ms > 0 and r.other_removed_ms > 0
        assert r.cupti_removed_ms == 0  # no recorded trace carries CUPTI's measured cost yet
        assert 0 < removed < r.traced_span_ms
