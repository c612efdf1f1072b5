"""A trace read by every path gives the same forecast, bit for bit: a file (parsed through a
view of its text), the same file gzip-compressed, a document in memory, and a step added as a
dict. And a gzip trace's saved targets are read from its streamed tail."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from habitat.data.files import read_tail
from habitat.data.forecast import Forecast, saved_targets_of_file

TARGETS = ["A100", "H100", "L4"]


def _same(a: Forecast, b: Forecast) -> None:
    assert len(a.steps) == len(b.steps)
    for x, y in zip(a.steps, b.steps):
        assert x.total_ms == y.total_ms
        assert x.phase_ms == y.phase_ms
        assert x.timeline == y.timeline
        assert x.op_table.array.tobytes() == y.op_table.array.tobytes()


def test_every_read_path_forecasts_the_same(golden_trace: Path, tmp_path: Path) -> None:
    from_file = Forecast.load(golden_trace, targets=TARGETS)
    packed = tmp_path / "trace.json.gz"
    packed.write_bytes(gzip.compress(golden_trace.read_bytes()))
    doc = json.loads(golden_trace.read_text())
    _same(from_file, Forecast.load(packed, targets=TARGETS))
    _same(from_file, Forecast.from_trace(doc, TARGETS))
    by_steps = Forecast(from_file.targets, doc["origin"])
    for step in doc["steps"]:
        by_steps.add_step(step)
    _same(from_file, by_steps)


def test_read_tail_of_plain_and_gzip_files(tmp_path: Path) -> None:
    text = b"".join(b"%08d\n" % i for i in range(300_000))  # 2.7 MB, several gzip chunks
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    for path in (plain, packed):
        assert read_tail(path, 100) == (text[-100:], False)
        assert read_tail(path, len(text) + 1) == (text, True)


def test_saved_targets_of_a_gzip_forecast(golden_trace: Path, tmp_path: Path) -> None:
    saved = tmp_path / "forecast.json"
    Forecast.load(golden_trace, targets=["A100", "L4"]).save(saved)
    packed = tmp_path / "forecast.json.gz"
    packed.write_bytes(gzip.compress(saved.read_bytes()))
    assert saved_targets_of_file(packed) == saved_targets_of_file(saved)
    assert saved_targets_of_file(packed, tail_bytes=64) == saved_targets_of_file(saved)
