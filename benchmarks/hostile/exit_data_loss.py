"""Data kept at the end of a training run with log_dir (issue 34's target: every step's row in
steps.jsonl and a final forecast.json, at a normal exit, at Ctrl-C and at SIGTERM, over 20 runs
each), with the predictor left open as a user's script often leaves it.

    python benchmarks/hostile/exit_data_loss.py [--runs 20] [--steps 15]

Each run is a subprocess training a small model for STEPS steps under predict_on(log_dir=...)
and ending at its last step by returning (exit), by SIGINT (Ctrl-C) or by SIGTERM; SIGKILL is
listed for reference (what a killed process keeps: the rows written so far).
Results: benchmarks/results/hostile-input.md.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = """
import os, signal, sys, torch, habitat
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(32, 64)
p = habitat.predict_on("A100", log_dir=sys.argv[1])
for i in range(int(sys.argv[2])):
    with p:
        loss = model(x).pow(2).mean(); loss.backward(); opt.step(); opt.zero_grad()
end = sys.argv[3]
if end != "exit":
    os.kill(os.getpid(), getattr(signal, end))
"""


def one_run(folder: Path, steps: int, end: str) -> tuple[int, int]:
    subprocess.run([sys.executable, "-c", SCRIPT, str(folder), str(steps), end],
                   capture_output=True, timeout=300)
    history = folder / "steps.jsonl"
    rows = sum(1 for line in history.read_bytes().split(b"\n") if line.strip()) if history.exists() else 0
    saved = folder / "forecast.json"
    totals = len(json.loads(saved.read_text())["forecast"]["steps"]) if saved.exists() else 0
    return rows, totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=15)
    args = parser.parse_args()
    print("| end of the run | runs | every step in steps.jsonl | final forecast.json | rows (min) |\n"
          "|---|---|---|---|---|")
    for end in ("exit", "SIGINT", "SIGTERM", "SIGKILL"):
        complete = final = 0
        fewest = args.steps
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                rows, totals = one_run(Path(folder), args.steps, end)
            complete += rows == args.steps
            final += totals == args.steps
            fewest = min(fewest, rows)
        print(f"| {end} | {args.runs} | {complete} | {final} | {fewest} of {args.steps} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
