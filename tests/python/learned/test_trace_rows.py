"""Trace rows for the memory-bound families (habitat.learned.traces) and their trainer
(habitat.learned.train_traces): rows read through the engine's own learned parts, and a tiny
deterministic training run mixing both sources. (That a fill reads nothing is the engine's:
tests/cpp/learned/test_elementwise_parts.cpp.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from habitat.learned import traces as tr  # noqa: E402
from habitat.learned import train_traces as tt  # noqa: E402
from habitat.learned.devices import default_table  # noqa: E402
from habitat.learned.fitting import QUICK, TrainConfig  # noqa: E402
from habitat.learned.model import EfficiencyMLP, load_all  # noqa: E402
from habitat.learned.neusight import KernelTable  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
TRACE = REPO / "benchmarks" / "results" / "h100-sxm5-80gb" / "traces" / "dcgan_fp32.json.gz"


@pytest.mark.skipif(not TRACE.is_file(), reason="recorded H100 traces not in this checkout")
def test_python_forecast_from_the_parts_equals_the_engines() -> None:
    """Every elementwise/softmax/layer-norm op of a recorded trace: the engine's shape-based
    forecast and the Python one from the same parts (the trainer's feature code, the shipped
    weights) agree."""
    ops = tr.trace_ops(TRACE, "h100-sxm5-80gb")
    assert len(ops) > 50
    assert "fill_" in {o.op for o in ops}
    pred = tr.forecast_us(ops, load_all(REPO / "weights"), default_table())
    engine = np.array([o.engine_us for o in ops])
    np.testing.assert_allclose(pred, engine, rtol=1e-5)


def _neusight_rows(n: int, rng: np.random.Generator):
    t = KernelTable("elementwise")
    for gpu, bw in (("Tesla T4", 320.0), ("Tesla V100-PCIE-32GB", 900.0), ("NVIDIA A100-PCIE-40GB", 1555.0)):
        for _ in range(n):
            size = float(2 ** rng.integers(10, 26))
            kernel = max(4.0 * size * 2 / (bw * 1e3) / 0.6, 1.0)  # 60 % of the roofline
            t.add("relu", gpu, (30.0 ** 4 + kernel ** 4) ** 0.25, 0.0,
                  {"n": size, "inputs": 1.0, "transcendental": 0.0, "elem_bytes": 4.0})
    return t.arrays()


def _trace_rows(n: int, rng: np.random.Generator) -> tr.TraceRows:
    t = KernelTable("elementwise")
    workloads = []
    for i in range(n):
        size = float(2 ** rng.integers(12, 26))
        t.add(tr.OP_PREFIX + "fill_", "H100-SXM5-80GB", max(4.0 * size / 3.35e6 / 0.9, 1.5), 0.0,
              {"n": size, "inputs": 0.0, "transcendental": 0.0, "elem_bytes": 4.0})
        workloads.append(tr.WORKLOADS[i % 2])
    return tr.TraceRows(t.arrays(), np.array(workloads))


def test_trace_rows_take_their_share_of_every_batch_and_have_no_floor() -> None:
    rng = np.random.default_rng(0)
    rows, source = tt.combine(_neusight_rows(30, rng), _trace_rows(10, rng), {tr.WORKLOADS[0]})
    assert (source != tt.NEUSIGHT).sum() == 5  # only the kept workload's trace rows
    w = tt.weights(source)
    assert np.isclose(w[source != tt.NEUSIGHT].sum(), tt.TRACE_SHARE)
    assert np.isclose(w.sum(), 1.0)
    from habitat.learned.fitting import design
    _, t_roof = design(rows, default_table())
    floors = tt.floors_for(rows, source, t_roof)
    assert floors[tr.OP_PREFIX + "fill_"] == {"H100-SXM5-80GB": tr.TRACE_FLOOR_US}
    assert all(v > 20 for v in floors["relu"].values())  # NeuSight's harness floor


def test_quick_training_is_deterministic_and_keeps_neusight_floors_only(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    ns, trace = _neusight_rows(40, rng), _trace_rows(20, rng)
    cfg = TrainConfig(**{**QUICK.__dict__, "steps": 100, "eval_every": 50})
    a = tt.train_family("elementwise", ns, trace, default_table(), cfg, None, log=lambda s: None)
    b = tt.train_family("elementwise", ns, trace, default_table(), cfg, None, log=lambda s: None)
    for wa, wb in zip(a.weights, b.weights):
        np.testing.assert_array_equal(wa, wb)
    assert set(a.metadata["harness_floor_us"]["per_gpu"]) == {"relu"}
    assert a.metadata["training_data"]["trace_rows"] == 20
    assert a.metadata["features"][-2:] == ["log2_elem_bytes", "log2_bandwidth_per_sm"]
    a.save(tmp_path)
    c = EfficiencyMLP.load(tmp_path, "elementwise")
    np.testing.assert_array_equal(c.weights[0], a.weights[0])


@pytest.mark.skipif(not TRACE.is_file(), reason="recorded H100 traces not in this checkout")
def test_cli_trains_and_scores_leave_one_workload_out(tmp_path: Path) -> None:
    """The command line on one recorded run and a tiny NeuSight-format folder (--quick)."""
    import csv
    import json

    for gpu in ("Tesla T4", "NVIDIA A100-PCIE-40GB"):
        d = tmp_path / "ns" / "kernels" / "softmax"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / f"{gpu.replace(' ', '_')}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["OPName", "Latency", "Device", "Grid x", "Grid y", "Grid z", "B", "H"])
            for b in (64, 256, 1024, 4096):
                for h in (128, 1024, 8192):
                    w.writerow(["softmax", 0.03 + b * h * 8 / 300e9 * 1e3, gpu, b, 1, 1, b, h])
    out = tmp_path / "w"
    rc = tt.main(["--data", str(tmp_path / "ns"), "--traces", str(REPO / "benchmarks" / "results"),
                  "--runs", "h100-sxm5-80gb", "--families", "softmax", "--quick", "--no-logo",
                  "--out", str(out), "--lowo", "--lowo-json", str(tmp_path / "lowo.json")])
    assert rc == 0
    meta = json.loads((out / "softmax.json").read_text())
    assert meta["training_data"]["trace_rows"] > 0
    assert meta["training_command"].startswith("python -m habitat.learned.train_traces")
    lowo = json.loads((tmp_path / "lowo.json").read_text())["softmax"]
    assert set(lowo) == {"before", "after", "per_workload"}
    assert lowo["after"]["softmax"]["n all"] == lowo["before"]["softmax"]["n all"] > 0



@pytest.mark.skipif(not TRACE.is_file(), reason="recorded H100 traces not in this checkout")
@pytest.mark.parametrize("which", ["collection", "both"])
def test_cli_trains_on_a_kernel_collection(tmp_path: Path, which: str) -> None:
    """--collection: device-time rows of a kernel collection (collect_kernels.py's Kernel
    Latency) train beside NeuSight's; with --train-rows collection no trace row trains, so
    --lowo scores one model on every traced op."""
    import csv
    import json

    d = tmp_path / "ns" / "kernels" / "softmax"
    d.mkdir(parents=True)
    with open(d / "Tesla_T4.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["OPName", "Latency", "Device", "Grid x", "Grid y", "Grid z", "B", "H"])
        for b in (64, 256, 1024, 4096):
            for h in (128, 1024, 8192):
                w.writerow(["softmax", 0.03 + b * h * 8 / 300e9 * 1e3, "Tesla T4", b, 1, 1, b, h])
    coll = tmp_path / "kernels"
    coll.mkdir()
    with open(coll / "softmax_bf16.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["OPName", "Latency", "Kernel Latency", "Device", "Grid x", "Grid y", "Grid z", "Precision",
                    "Phase", "B", "H"])
        for b in (64, 512, 4096):
            for h in (256, 2048):
                kernel_ms = 0.002 + b * h * 4 / 3.0e12 * 1e3
                for phase in ("fwd", "bwd"):  # the backward rows are not softmax rows
                    w.writerow(["softmax", kernel_ms + 0.01, kernel_ms, "NVIDIA H100 80GB HBM3", b, 1, 1, "bf16",
                                phase, b, h])
    out = tmp_path / "w"
    rc = tt.main(["--data", str(tmp_path / "ns"), "--traces", str(REPO / "benchmarks" / "results"),
                  "--runs", "h100-sxm5-80gb", "--families", "softmax", "--quick", "--no-logo",
                  "--collection", str(coll), "--train-rows", which,
                  "--out", str(out), "--lowo", "--lowo-json", str(tmp_path / "lowo.json")])
    assert rc == 0
    data = json.loads((out / "softmax.json").read_text())["training_data"]
    assert data["of_which_kernel_collection"] == 6
    assert (data["trace_rows"] > 6) == (which == "both")
    assert ("held out" in data["note"] and "not held out" not in data["note"]) == (which == "collection")
    lowo = json.loads((tmp_path / "lowo.json").read_text())["softmax"]
    assert lowo["after"]["softmax"]["n all"] == lowo["before"]["softmax"]["n all"] > 0
    with pytest.raises(SystemExit):
        tt.main(["--data", str(tmp_path / "ns"), "--traces", ".", "--train-rows", "collection"])
