"""The engine's per-op memo gives bit-identical forecasts (HABITAT_OP_MEMO=0 turns it off)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from subprocess_env import subprocess_env

SCRIPT = """
import json, sys
from habitat.data.forecast import Forecast
f = Forecast.load(sys.argv[1], targets=["A100", "H100", "L4", "T4"], keep_steps=None)
print(json.dumps([[s.total_ms, s.phase_ms, s.method_ops,
                   [[(p.time_us, p.method, p.share_us, p.share_method) for p in op.predictions.values()]
                    for op in s.ops]] for s in f.steps]))
"""


def _forecast(trace: Path, memo: str) -> str:
    env = subprocess_env(HABITAT_OP_MEMO=memo)
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(trace)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_same_forecast_with_and_without_the_memo(golden_trace: Path, tmp_path: Path):
    # Both steps, and a third with every op repeated under new ids (memo hits across ops).
    doc = json.loads(golden_trace.read_text())
    step = json.loads(json.dumps(doc["steps"][0]))
    top = max(op["id"] for op in step["ops"]) + 1
    extra = []
    for op in step["ops"]:
        new = dict(op, id=op["id"] + top)
        if op.get("parent") is not None:
            new["parent"] = op["parent"] + top
        extra.append(new)
    doc["steps"].append(dict(step, index=2, ops=step["ops"] + extra))
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(doc))
    with_memo, without = _forecast(trace, "1"), _forecast(trace, "0")
    assert with_memo == without  # repr of every float: bit-identical
    assert len(json.loads(with_memo)) == 3


GPU_TRACE = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "h100-sxm5-80gb" / "traces" / "gpt2_small_bf16.json.gz"

ACROSS_CALLS = """
import gzip, json, sys
from habitat.data.forecast import Forecast
text = gzip.decompress(open(sys.argv[1], "rb").read()).decode()
doc = json.loads(text)
out = []
# The memo lasts across calls (steps) and targets: the same trace forecast for target lists
# in other orders and subsets must give what a fresh process without the memo gives.
for targets in json.loads(sys.argv[2]):
    f = Forecast.from_trace(doc, targets, keep_steps=None)
    out.append([[s.total_ms, s.phase_ms, s.method_ops,
                 [[(p.time_us, p.method, p.share_us, p.share_method) for p in op.predictions.values()]
                  for op in s.ops]] for s in f.steps])
print(json.dumps(out))
"""


def test_memo_across_steps_and_targets_is_bit_identical():
    # A GPU-origin trace: runtime-based methods, whose origin side the memo keeps per op.
    lists = [["A100", "H100"], ["L4", "A100", "H200"], ["H100", "A100"]]
    out = subprocess.run([sys.executable, "-c", ACROSS_CALLS, str(GPU_TRACE), json.dumps(lists)],
                         capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert out.returncode == 0, out.stderr
    with_memo = json.loads(out.stdout)
    for i, targets in enumerate(lists):
        fresh = subprocess.run([sys.executable, "-c", ACROSS_CALLS, str(GPU_TRACE), json.dumps([targets])],
                               capture_output=True, text=True, env=subprocess_env(HABITAT_OP_MEMO="0"),
                               timeout=600)
        assert fresh.returncode == 0, fresh.stderr
        assert json.loads(fresh.stdout)[0] == with_memo[i]  # floats through repr: bit-identical
    methods = {m for step in with_memo[0] for m in step[2]["A100-SXM4-80GB"]}
    assert methods & {"learned_ratio", "roofline_ratio", "wave_scaling"}  # runtime-based ops ran
