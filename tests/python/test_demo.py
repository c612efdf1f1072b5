"""The demo: numbers its steps and their measured times as print(forecast) does, and says what
next, in commands that work from where the user is."""
from __future__ import annotations

import json
import re

from habitat import demo
from habitat.cli import main as cli


def test_demo_steps_match_the_summary_and_it_ends_with_next_steps(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the user is: run.sh runs the demo there
    saved = "step.json"
    assert demo.main(["--steps", "2", "--batch", "1", "--context", "8", "-t", "A100,T4",
                      "--save", saved]) == 0
    out = capsys.readouterr().out
    steps = re.findall(r"^  step (\d+): .*measured ([\d.]+) ms", out, re.M)
    summary = re.search(r"^Habitat forecast: step (\d+) \(measured ([\d.]+) ms", out, re.M)
    assert [s for s, _ in steps] == ["0", "1"] and summary
    assert steps[-1] == summary.groups()  # the same step number and measured time
    doc = json.loads((tmp_path / saved).read_text())
    assert [s["index"] for s in doc["steps"]] == [0, 1]
    tail = out.rstrip().splitlines()[-4:]
    assert f"Saved the trace and forecast to {saved}" in tail[0]
    commands = [line.split("#")[0].split()[1:] for line in tail[1:]]
    assert commands[0] == ["compare", saved] and commands[1] == ["report", saved]
    for argv in commands:  # each suggested next step works as printed, from the same folder
        assert cli(argv) == 0, argv
    assert (tmp_path / "report.html").is_file()


def test_demo_without_save_says_how_to_save(capsys):
    assert demo.main(["--steps", "1", "--batch", "1", "--context", "8", "-t", "A100"]) == 0
    out = capsys.readouterr().out
    assert "forecast.save(" in out and "habitat compare step.json" in out
