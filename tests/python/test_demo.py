"""The demo: numbers its steps and their measured times as print(forecast) does, and says what next."""
from __future__ import annotations

import json
import re

from habitat import demo


def test_demo_steps_match_the_summary_and_it_ends_with_next_steps(capsys, tmp_path):
    saved = tmp_path / "step.json"
    assert demo.main(["--steps", "2", "--batch", "1", "--context", "8", "-t", "A100,T4",
                      "--save", str(saved)]) == 0
    out = capsys.readouterr().out
    steps = re.findall(r"^  step (\d+): .*measured ([\d.]+) ms", out, re.M)
    summary = re.search(r"^Habitat forecast: step (\d+) \(measured ([\d.]+) ms", out, re.M)
    assert [s for s, _ in steps] == ["0", "1"] and summary
    assert steps[-1] == summary.groups()  # the same step number and measured time
    doc = json.loads(saved.read_text())
    assert [s["index"] for s in doc["steps"]] == [0, 1]
    tail = out.rstrip().splitlines()[-4:]
    assert f"Saved the trace and forecast to {saved}" in tail[0]
    assert tail[1].lstrip().startswith(f"habitat compare {saved}")
    assert tail[2].lstrip().startswith(f"habitat report {saved} -o report.html")


def test_demo_without_save_says_how_to_save(capsys):
    assert demo.main(["--steps", "1", "--batch", "1", "--context", "8", "-t", "A100"]) == 0
    out = capsys.readouterr().out
    assert "forecast.save(" in out and "habitat compare step.json" in out
