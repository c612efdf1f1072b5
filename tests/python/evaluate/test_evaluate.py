"""python -m habitat.evaluate on the shared NeuSight data, in --quick mode."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from habitat.evaluate import predictors as P  # noqa: E402
from habitat.evaluate.__main__ import main  # noqa: E402
from habitat.evaluate.models import node_parts  # noqa: E402
from habitat.learned.devices import default_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "data" / "neusight"
needs_data = pytest.mark.skipif(not (DATA / "kernels").is_dir(), reason="NeuSight data not present")
needs_weights = pytest.mark.skipif(not (ROOT / "weights" / "gemm.safetensors").is_file(), reason="no weights")


@needs_data
@needs_weights
def test_kernels_quick(tmp_path: Path, capsys) -> None:
    out = tmp_path / "k.json"
    assert main(["kernels", "--data", str(DATA), "--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Runtime-based" in printed and "roofline" in printed
    r = json.loads(out.read_text())
    sb = r["shape_based"]["test"]
    # the unseen L4 is evaluated by the shipped model, the training GPUs by leave-one-out models
    assert sb["bmm"]["NVIDIA L4"]["model"] == "unseen"
    assert sb["bmm"]["Tesla T4"]["model"] == "leave-one-GPU-out"
    for group in ("bmm", "linear", "elementwise", "softmax", "ln"):
        for e in sb[group].values():
            assert e["ours"]["n"] > 0 and np.isfinite(e["ours"]["mean"])
    pairs = r["runtime_based"]["kernels"]["bmm"]
    assert "Tesla T4 -> Tesla P4" in pairs and "Tesla P4 -> Tesla T4" in pairs
    assert set(pairs["Tesla T4 -> Tesla P4"]) >= {"ours_ratio", "roofline_ratio", "habitat_wave_scaling",
                                                  "habitat_bandwidth_ratio"}


@needs_data
@needs_weights
def test_kernels_origin_target_filters(tmp_path: Path) -> None:
    out = tmp_path / "k.json"
    main(["kernels", "--data", str(DATA), "--quick", "--json", str(out),
          "--origin", "Tesla T4", "--target", "Tesla P4"])
    r = json.loads(out.read_text())
    assert set(r["runtime_based"]["kernels"]["bmm"]) == {"Tesla T4 -> Tesla P4"}
    assert set(r["shape_based"]["kernels"]["bmm"]) == {"Tesla P4"}


@needs_data
@needs_weights
def test_models_quick(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    assert main(["models", "--data", str(DATA), "--quick", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert "AMD_Instinct_MI100" in r["skipped_gpus"]
    assert r["configs"]
    for per_gpu in r["configs"].values():
        for e in per_gpu.values():
            assert e["measured_ms"] > 0 and e["shape_ours_ms"] > 0


def test_node_mapping_of_a_linear_layer() -> None:
    row = {"op": "call_module", "target": "bert.layer.0.dense", "input_shapes": "[[2, 512, 1024]]",
           "output_shape": "(2, 512, 4096)", "dtype": "torch.float32",
           "meta": "{'nn_module_stack': OrderedDict([('x', <class 'torch.nn.modules.linear.Linear'>)])}"}
    parts = node_parts(row, training=True)
    assert parts["fw"][0].shape == {"b": 1, "m": 1024.0, "n": 4096.0, "k": 1024.0, "elem_bytes": 4.0}
    assert len(parts["bw"]) == 2 and parts["acc"][0].shape["n"] == 4096 * 1024 + 4096


def test_node_mapping_of_opts_clamp_and_functional_dropout() -> None:
    # OPT's attention: torch.max(scores, torch.tensor(min)), a one-element second operand.
    clamp = {"op": "call_function", "target": "<built-in method max of type object>",
             "input_shapes": "[[2, 32, 2048, 2048], [1]]", "output_shape": "(2, 32, 2048, 2048)",
             "dtype": "torch.float32", "meta": "{}"}
    parts = node_parts(clamp, training=True)
    n = 2.0 * 32 * 2048 * 2048
    assert [p.shape["n"] for p in parts["fw"]] == [n] and parts["fw"][0].shape["inputs"] == 1
    # ATen's maximum backward: an ==, a / 2, a where, a < and a masked_fill_.
    assert [p.shape["inputs"] for p in parts["bw"]] == [1, 1, 3, 1, 2]
    # torch.max(x, dim) returns values and indices: a reduction, not modelled here.
    assert node_parts({**clamp, "input_shapes": "[[2, 32, 2048, 2048]]"}, training=True) == {}
    dropout = {**clamp, "target": "<function dropout at 0x7f>", "input_shapes": "[[4096, 2048]]",
               "output_shape": "(4096, 2048)"}
    assert set(node_parts(dropout, training=True)) == {"fw", "bw"}
    assert node_parts(dropout, training=False) == {}


def test_habitat_wave_scaling_formula() -> None:
    t = default_table()
    o, d = t.find("V100-PCIE-32GB"), t.find("T4")
    one = np.array([1.0])
    # memory-bound (intensity ~0): pure bandwidth ratio
    got = P.habitat_wave_scaling(one, np.array([1e-9]), np.array([1.0]), None, o, d)
    assert got[0] == pytest.approx(o.bandwidth_gbs / d.bandwidth_gbs, rel=1e-6)
    # far compute-bound: clock and SM ratios
    got = P.habitat_wave_scaling(one, np.array([1e12]), np.array([1.0]), None, o, d)
    assert got[0] == pytest.approx((o.clock_mhz / d.clock_mhz) * (o.sms / d.sms), rel=1e-3)
