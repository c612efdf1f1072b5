"""The GPU stage of the real-model benchmark (benchmarks/gpu/real_model_kernels.py) run on the
CPU, and real_models.py compare on small fake GPU runs whose kernel times are known."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from bench_scripts import loaded_script

GPU = "H100-SXM5-80GB"
SMOKE = ["--device", "cpu", "--smoke", "--warmup", "0", "--bursts", "1", "--burst-steps", "1", "--traced", "1"]


@pytest.fixture(scope="module")
def rmk():
    with loaded_script("benchmarks/gpu/real_model_kernels.py", "real_model_kernels") as module:
        yield module


@pytest.fixture(scope="module")
def rm(real_models):
    return real_models


def test_gpu_stage_runs_on_the_cpu_and_writes_its_summary(rmk, tmp_path: Path) -> None:
    assert rmk.main(SMOKE + ["--models", "mobilenet_v3_large", "--precisions", "fp32", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "cpu" / "summary.json").read_text())
    (r,) = summary["results"]
    assert r["model"] == "mobilenet_v3_large" and r["precision"] == "fp32" and r["smoke"]
    assert r["measured"]["median_ms"] > 0 and len(r["measured"]["bursts_ms"]) == 1
    assert r["coverage"]["kernel_sum_ms"] == 0  # no kernels on a CPU
    trace = json.loads(gzip.open(tmp_path / "cpu" / r["trace"], "rt").read())
    assert len(trace["steps"][0]["ops"]) > 1000
    assert "| mobilenet_v3_large | fp32 |" in (tmp_path / "cpu" / "summary.md").read_text()


def test_gpu_stage_keeps_to_its_budget(rmk, tmp_path: Path) -> None:
    assert rmk.main(SMOKE + ["--models", "dcgan", "t5_small", "--budget-s", "0", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "cpu" / "summary.json").read_text())["results"]
    assert [(r["model"], r["precision"]) for r in results] == [
        ("t5_small", "fp32"), ("t5_small", "bf16"), ("dcgan", "fp32"), ("dcgan", "bf16")]  # new networks first
    assert all(r["skipped"].startswith("budget") for r in results)


def test_kernel_breakdown_sums_kernels_by_class_and_top_level_op(rmk) -> None:
    ops = [
        {"id": 1, "name": "aten::conv2d", "phase": "forward", "args": [], "has_children": True},
        {"id": 2, "parent": 1, "name": "aten::cudnn_convolution", "phase": "forward",
         "args": [{"name": "weight", "tensor": {"shape": [32, 1, 3, 3]}}, {"name": "groups", "int": 32}],
         "kernels": [{"name": "dw_fwd", "duration_us": 30.0}, {"name": "dw_fwd", "duration_us": 10.0}]},
        {"id": 3, "name": "aten::_foreach_mul_", "phase": "optimizer", "args": [], "kernels": [{"name": "foreach", "duration_us": 5.0}]},
    ]
    origin = {"device": GPU, "host": "x", "torch_version": "2.13.0", "habitat_version": "0.1.0"}
    out = rmk.kernel_breakdown(origin, {"index": 0, "wall_ms": 1.0, "ops": ops}, GPU)
    assert out["kernel_sum_ms"] == pytest.approx(0.045)
    assert out["kernels"] == 3
    assert out["kernels_by_class_ms"] == pytest.approx({"conv depthwise/grouped": 0.04, "optimizer": 0.005})
    assert out["kernels_by_op_us"] == pytest.approx({"forward aten::conv2d": 40.0, "optimizer aten::_foreach_mul_": 5.0})


def _fake_gpu_run(rm, folder: Path, cpu_doc: dict, scale: float, keep_trace: bool) -> None:
    """A GPU run of the CPU trace's own ops, each op's kernels taking `scale` times its H100
    forecast: the forecast is then off by 1/scale - 1 in every class."""
    step = cpu_doc["steps"][0]
    forecast = rm.classify(cpu_doc["origin"], step, [GPU])
    share = rm.op_classes.forecast_us(forecast, 0)
    gpu_step = dict(step, ops=[dict(op, kernels=[{"name": "k", "duration_us": scale * share[op["id"]]}]) if share[op["id"]]
                               else op for op in step["ops"]])
    kernel_ms = scale * forecast["totals"][0]["total_ms"]
    result = {"model": "mobilenet_v3_large", "precision": "fp32", "measured": {"median_ms": kernel_ms + 1.0},
              "coverage": {"kernel_sum_ms": kernel_ms}}
    if keep_trace:
        (folder / "traces").mkdir(parents=True)
        with gzip.open(folder / "traces" / "t.json.gz", "wt") as f:
            json.dump(dict(cpu_doc, steps=[gpu_step]), f)
        result["trace"] = "traces/t.json.gz"
    else:
        folder.mkdir(parents=True)
        classes = rm.op_classes.classify_step(step["ops"], rm.op_classes.engine_classes(forecast))
        result["kernels_by_class_ms"] = {c: scale * ms for c, ms in rm.op_classes.sum_by_class(classes, share).items()}
    env = {"gpu": GPU, "date": "2026-11-30 10:00:00 UTC" if keep_trace else "2026-12-01 10:00:00 UTC"}
    (folder / "summary.json").write_text(json.dumps({"environment": env, "results": [result]}))


@pytest.fixture(scope="module")
def cache(smoke_trace, tmp_path_factory) -> Path:
    """A CPU-trace folder with an fp32 smoke step of MobileNetV3 and one of DCGAN."""
    folder = tmp_path_factory.mktemp("cpu-traces")
    for name, batch in (("mobilenet_v3_large", 3), ("dcgan", 2)):
        with gzip.open(folder / f"{name}_fp32.json.gz", "wt") as f:
            json.dump(smoke_trace(name, "fp32", batch), f)
    return folder


def test_compare_reads_fake_runs_and_splits_the_error_by_class(rm, cache: Path, tmp_path: Path, capsys) -> None:
    doc = rm.load_json(cache / "mobilenet_v3_large_fp32.json.gz")
    _fake_gpu_run(rm, tmp_path / "with-trace", doc, 2.0, keep_trace=True)
    _fake_gpu_run(rm, tmp_path / "summary-only", doc, 4.0, keep_trace=False)
    out = tmp_path / "rows.json"
    assert rm.compare(cache, by_class=True, json_out=out, measured_dirs=[tmp_path / "with-trace",
                                                                          tmp_path / "summary-only"]) == 0
    text = capsys.readouterr().out
    rows = json.loads(out.read_text())
    errors = {r["run"]: r["kernel_error_pct"] for r in rows["measured"]}
    assert errors == pytest.approx({"2026-11-30": -50.0, "2026-12-01": -75.0})
    for r in rows["measured"]:
        factor = 2.0 if r["run"] == "2026-11-30" else 4.0
        assert r["gpu_by_class_ms"] == pytest.approx({c: factor * ms for c, ms in r["forecast_by_class_ms"].items()})
        assert r["host_bound_ms"] == pytest.approx(1.0)
    assert "| mobilenet_v3_large | fp32 | H100-SXM5-80GB | 2026-11-30 |" in text
    assert "| conv depthwise/grouped | fp32 | 2 |" in text  # the per-class summary over both rows
    # DCGAN has no measurement here: its forecast, "not measured", and its classes.
    assert [(e["model"], e["precision"]) for e in rows["not_measured"]] == [("dcgan", "fp32")]
    assert "| dcgan | fp32 |" in text and "not measured |" in text
    assert "Their forecast per op class on H100-SXM5-80GB" in text


def test_compare_names_a_folder_without_a_summary(rm, cache: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no summary.json"):
        rm.compare(cache, by_class=False, json_out=None, measured_dirs=[tmp_path])
