"""TensorBoard content, read back with TensorBoard's own event reader."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("tensorboard", reason="TensorBoard logging needs the tensorboard package")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.plugins.custom_scalar import layout_pb2  # noqa: E402
from tools_fixtures import TARGETS, capture  # noqa: E402

from habitat.present.tensorboard import (  # noqa: E402
    AS_SEEN,
    KERNELS,
    MEASURED,
    OP_HISTOGRAM,
    OPS_TABLE,
    PHASE,
    STEP,
    TOP_OPS,
    TensorBoardLogger,
    run_folder,
    tag_keys,
)

STEPS = 3


def read(log_dir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def scalar_series(acc: EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in acc.Scalars(tag)]


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    forecast = capture(TARGETS, steps=STEPS)
    log_dir = tmp_path_factory.mktemp("tb")
    with TensorBoardLogger(log_dir, detail_every=1) as logger:  # every step's detail
        logger.log_forecast(forecast)
    runs = {t: read(log_dir / run_folder(t)) for t in forecast.targets}
    return forecast, read(log_dir), runs


def test_a_run_per_gpu_with_the_same_tags_so_each_chart_draws_every_gpu(logged):
    forecast, own, runs = logged
    assert set(runs) == set(forecast.targets)
    tags = {t: {tag for tag in acc.Tags()["scalars"] if not tag.startswith(TOP_OPS)}
            for t, acc in runs.items()}  # each GPU's top ops are its own
    first = tags[forecast.targets[0]]
    assert {AS_SEEN, KERNELS} <= first and all(t == first for t in tags.values())
    assert own.Tags()["scalars"] == [MEASURED]  # this machine's step: in the logger's own run


def test_the_step_time_as_seen_is_the_first_chart(logged):
    """TensorBoard's Time Series tab sorts tags character by character ("/" first, then by
    code: capitals before lower case), groups them by the part before the first "/" in that
    order and opens the first two groups: the step time, then its phases."""
    _, own, runs = logged
    tags = set(own.Tags()["scalars"])
    for acc in runs.values():
        tags |= set(acc.Tags()["scalars"]) | set(acc.Tags()["histograms"])
    ordered = sorted(tags, key=lambda t: t.replace("/", "\0"))
    groups = list(dict.fromkeys(t.split("/", 1)[0] for t in ordered))
    assert groups[:2] == [STEP, PHASE] and ordered[0] == AS_SEEN
    # The Custom Scalars tab reads the tags it matched as regular expressions again.
    assert all(re.fullmatch(t, t) for t in tags)


def test_step_scalars_as_seen_kernels_phases_and_measured(logged):
    forecast, own, runs = logged
    steps = [s.index for s in forecast.steps]
    measured = scalar_series(own, MEASURED)
    assert [s for s, _ in measured] == steps
    assert [v for _, v in measured] == pytest.approx([s.measured_ms for s in forecast.steps], rel=1e-6)
    for target, acc in runs.items():
        series = scalar_series(acc, AS_SEEN)
        assert [s for s, _ in series] == steps
        assert [v for _, v in series] == pytest.approx([s.step_ms(target) for s in forecast.steps], rel=1e-6)
        assert [v for _, v in scalar_series(acc, KERNELS)] == pytest.approx(
            [s.total_ms[target] for s in forecast.steps], rel=1e-6)
        for phase in ("forward", "backward", "optimizer"):
            assert [v for _, v in scalar_series(acc, f"{PHASE}/{phase}")] == pytest.approx(
                [s.phase_ms[target][phase] for s in forecast.steps], rel=1e-6)


def test_top_ops_are_scalars_of_their_predicted_time(logged):
    forecast, _, runs = logged
    step = forecast.latest
    for target, acc in runs.items():
        tags = acc.Tags()["scalars"]
        op_tags = [t for t in tags if t.startswith(f"{TOP_OPS}/")]
        assert 0 < len(op_tags)
        top = step.top_ops(target, 1)[0]
        tag = f"{TOP_OPS}/{tag_keys(step.ops)[id(top)]}"
        assert tag in tags, f"the top op {top.full_name} has no chart"
        last_step, value = scalar_series(acc, tag)[-1]
        assert last_step == step.index
        assert value == pytest.approx(top.predictions[target].share_us, rel=1e-6)
        logged_now = [t for t in op_tags if scalar_series(acc, t)[-1][0] == step.index]
        assert len(logged_now) == min(10, len(step.counted_ops(target)))


def test_histogram_of_per_op_times_per_target(logged):
    forecast, _, runs = logged
    step = forecast.latest
    for target, acc in runs.items():
        events = acc.Histograms(f"{OP_HISTOGRAM}/share")
        assert [e.step for e in events] == [s.index for s in forecast.steps]
        hist = events[-1].histogram_value
        times = [op.predictions[target].share_us for op in step.counted_ops(target)]
        assert hist.num == len(times)
        # Each piece of work once: the op shares add up to the step's predicted time.
        assert hist.sum == pytest.approx(step.total_ms[target] * 1e3, rel=1e-6)
        assert hist.max == pytest.approx(max(times), rel=1e-6)


def test_text_table_lists_every_op_with_module_shapes_and_predictions(logged):
    forecast, acc, _ = logged
    tag = f"{OPS_TABLE}/text_summary"
    assert tag in acc.Tags()["tensors"]
    events = acc.Tensors(tag)
    assert [e.step for e in events] == [s.index for s in forecast.steps]
    text = events[-1].tensor_proto.string_val[0].decode()
    step = forecast.latest
    header = text.splitlines()[2]
    for target in forecast.targets:
        assert f"{target} (us)" in header and f"method {target}" in header
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(step.ops)
    addmm = next(op for op in step.ops if op.name == "aten::addmm" and op.module_path)
    row = next(r for r in rows if addmm.module_path in r and "aten::addmm" in r)
    assert "32x64" in row or "32x128" in row  # input shapes
    assert f"{addmm.predictions[forecast.targets[0]].time_us:.2f}" in row


def test_custom_scalars_layout_puts_every_gpu_on_one_chart(logged):
    _, acc, _ = logged
    events = acc.Tensors("custom_scalars__config__")
    layout = layout_pb2.Layout.FromString(events[-1].tensor_proto.string_val[0])
    charts = {c.title: c for cat in layout.category for c in cat.chart}
    patterns = list(charts["step time as seen per GPU (ms)"].multiline.tag)
    assert any(re.fullmatch(p, AS_SEEN) for p in patterns)  # one tag, a line per GPU's run
    assert not any(re.fullmatch(p, MEASURED) for p in patterns)


def test_predict_on_with_log_dir_writes_events_every_step(tmp_path):
    forecast = capture(TARGETS, steps=2, log_dir=tmp_path)
    runs = sorted(p.parent for p in tmp_path.rglob("events.out.tfevents.*"))
    assert len(runs) == 1 + len(forecast.targets)  # one folder per predict_on, a run per GPU in it
    series = scalar_series(read(runs[0] / run_folder(forecast.targets[0])), AS_SEEN)
    assert [s for s, _ in series] == [s.index for s in forecast.steps]


def test_scalar_records_are_byte_identical_to_tensorboards_own_encoding(tmp_path):
    """The engine's record (Event proto + TFRecord framing) equals what TensorBoard's protobuf
    and its RecordWriter produce for the same scalars; a whole file reads back with the
    values add_scalar would give (float32)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    from habitat import _engine
    from habitat.present.tensorboard import EventFile

    tags = [f"{STEP}/measured_ms", f"{STEP}/predicted_ms/A100", f"{PHASE}/A100/forward_ms"]
    values = [1.25, 0.1, 1e-3]
    for step, wall in [(0, 0.0), (7, 1700000000.125), (2**40, 12.5)]:
        event = event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in zip(tags, values)]))

        class Sink:
            data = b""

            def write(self, b: bytes) -> None:
                Sink.data += b

        RecordWriter(Sink()).write(event.SerializeToString())
        assert _engine.tb_scalars_record(step, wall, tags, values) == Sink.data
        assert _engine.tb_record(event.SerializeToString()) == Sink.data
    version = event_pb2.Event(wall_time=5.5, file_version="brain.Event:2")
    assert _engine.tb_file_version_record(5.5)[12:-4] == version.SerializeToString()
    assert _engine.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    with pytest.raises(ValueError, match="one value per tag"):
        _engine.tb_scalars_record(0, 0.0, tags, values[:1])

    out = EventFile(tmp_path)
    for step in range(5):
        out.scalars(step, tags, [v * step for v in values])
    out.close()
    acc = read(tmp_path)
    assert sorted(acc.Tags()["scalars"]) == sorted(tags)
    import numpy as np
    for tag, v in zip(tags, values):
        assert scalar_series(acc, tag) == [(s, float(np.float32(v * s))) for s in range(5)]
