"""The GPU kernel collector's CPU-side parts: options, budget split, shapes; and CPU dry runs of
the whole script (tiny shapes). (Cases: test_collect_kernels_cases.py; kernels of a run and
CSVs: test_collect_kernels_trace.py.)"""
from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import io
import random
import sys
from pathlib import Path

import pytest
from bench_scripts import loaded_script

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def ck():
    with loaded_script("benchmarks/gpu/collect_kernels.py", "collect_kernels") as module:
        yield module


def test_families_option(ck):
    assert ck.parse_args(["--out", "x"]).families == ("gemm", "conv", "attention", "elementwise", "layernorm",
                                                      "softmax", "reduction", "batchnorm", "gconv", "pointwise")
    assert ck.parse_args(["--out", "x", "--families", "attention, gemm"]).families == ("attention", "gemm")
    assert ck.parse_args(["--out", "x", "--families", "conv,conv"]).families == ("conv",)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown families lstm"):
        ck.parse_families("gemm,lstm")
    with pytest.raises(SystemExit):
        ck.parse_args(["--out", "x", "--families", "pooling"])
    dry = ck.parse_args(["--out", "x", "--dry-run"])
    assert (dry.gemm, dry.conv, dry.attention, dry.memory, dry.repeats, dry.profiled_runs) == (4, 2, 2, 2, 3, 2)
    assert sum(f.weight for f in ck.FAMILIES.values()) == pytest.approx(1.0)
    assert {f.count for f in ck.FAMILIES.values()} == set(ck.COUNT_OPTIONS)


def test_budget_reaches_every_family(ck):
    families = ["gemm", "conv", "attention"]
    w = {f: ck.FAMILIES[f].weight for f in families}
    first = ck.family_budget(100.0, "gemm", families)
    assert first == pytest.approx(100.0 * w["gemm"] / (w["gemm"] + w["conv"] + w["attention"]))
    # gemm used all of its share: the rest is split between conv and attention
    assert ck.family_budget(65.0, "conv", families[1:]) == pytest.approx(65.0 * w["conv"] / (w["conv"] + w["attention"]))
    # time left unused by earlier families goes to the last one; an overrun leaves it nothing
    assert ck.family_budget(80.0, "attention", families[2:]) == pytest.approx(80.0)
    assert ck.family_budget(-5.0, "attention", ["attention"]) == 0.0
    assert ck.family_budget(50.0, "attention", ["attention"]) == pytest.approx(50.0)


def test_shapes_are_reproducible_and_bounded(ck):
    ks = sys.modules["kernel_shapes"]
    g1, g2 = ks.gemm_shapes(40, random.Random(3)), ks.gemm_shapes(40, random.Random(3))
    assert g1 == g2
    assert {op for op, _ in g1} == {"bmm", "linear"}
    for op, s in g1:
        assert s["B"] * (s["M"] * s["N"] + s["N"] * s["K"] + s["M"] * s["K"]) <= 2**28
        assert op == "bmm" or s["B"] == 1
    for s in ks.conv_shapes(40, random.Random(1)):
        assert s["B"] * max(s["Input_Channel"], s["Output_Channel"]) * s["Input_Size"] ** 2 <= 2**27
        assert s["Padding"] == s["Kernel_Szie"] // 2 and s["Stride"] in (1, 2)
    shapes = ks.attention_shapes(200, random.Random(0))
    assert all(s["B"] * s["H"] * s["L"] * s["S"] <= 2**28 for s in shapes)
    assert {s["E"] for s in shapes} == {64, 128}
    assert any(s["L"] != s["S"] for s in shapes) and any(s["L"] == s["S"] for s in shapes)
    assert all(128 <= s["L"] <= 8192 for s in shapes)


def test_family_shapes_do_not_depend_on_the_families_before(ck):
    a = ck.FAMILIES["batchnorm"].shapes(30, ck.family_rng(0, "batchnorm"))
    ck.FAMILIES["conv"].shapes(30, ck.family_rng(0, "conv"))
    assert ck.FAMILIES["batchnorm"].shapes(30, ck.family_rng(0, "batchnorm")) == a
    assert ck.FAMILIES["batchnorm"].shapes(30, ck.family_rng(1, "batchnorm")) != a


def test_passes_hold_what_memory_allows_and_skip_failing_shapes(ck):
    measure = sys.modules["kernel_measure"]

    def make(shapes):
        if shapes[0] == "bad":
            raise RuntimeError("CUDA out of memory")
        return [f"{shapes[0]}:{i}" for i in range(2)]
    cases, left, failed = measure.next_pass(["a", "b", "c", "d", "e"], make, 3, lambda: False)
    assert cases == ["a:0", "a:1", "b:0", "b:1", "c:0", "c:1"] and left == ["d", "e"] and failed == 0
    held = []
    cases, left, failed = measure.next_pass(["a", "bad", "b", "c"], lambda s: held.append(s[0]) or make(s), 3,
                                            lambda: len(held) >= 3)
    assert cases == ["a:0", "a:1", "b:0", "b:1"] and left == ["c"] and failed == 1
    # memory already full after the first shape: one shape a pass, never none
    cases, left, _ = measure.next_pass(["a", "b"], make, 8, lambda: True)
    assert cases == ["a:0", "a:1"] and left == ["b"]
    assert measure.device_memory_full("cpu")() is False


def _main(ck, *argv: str) -> str:
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        assert ck.main(["--device", "cpu", "--dry-run", *argv]) == 0
    return log.getvalue()


def test_dry_run_keeps_the_files_of_earlier_calls(ck, tmp_path):
    out = tmp_path / "kernels"
    log = _main(ck, "--out", str(out), "--families", "layernorm,reduction", "--budget-s", "600")
    assert {p.stem for p in out.glob("*.csv")} == {f"{s}_{p}" for s in ("ln", "sum") for p in ("fp32", "bf16")}
    assert "0 failed to build" in log
    with open(out / "ln_fp32.csv") as f:
        first = list(csv.DictReader(f))
    # a second call into the directory (another seed) keeps every row
    log = _main(ck, "--out", str(out), "--families", "layernorm", "--budget-s", "600", "--seed", "5")
    assert "keeping the" in log
    with open(out / "ln_fp32.csv") as f:
        both = list(csv.DictReader(f))
    key = ("B", "H", "Phase")
    assert [tuple(r[k] for k in key) for r in both[:len(first)]] == [tuple(r[k] for k in key) for r in first]
    assert len(both) == 2 * len(first) and (out / "sum_fp32.csv").exists()


def test_cpu_dry_run_writes_each_selected_family(ck, tmp_path, capsys):
    out = tmp_path / "kernels"
    assert ck.main(["--device", "cpu", "--dry-run", "--out", str(out), "--families", "attention,conv",
                    "--budget-s", "60"]) == 0
    names = {p.name for p in out.glob("*.csv")}
    assert {"conv_fp32.csv", "conv_tf32.csv", "conv_bf16.csv", "sdpa_fp32.csv"} <= names
    assert not any(n.startswith(("bmm", "linear")) for n in names)
    with open(out / "sdpa_fp32.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["Phase"] for r in rows} == {"fwd", "fwd+bwd"}
    assert {r["Causal"] for r in rows} == {"0", "1"}
    assert "math" in {r["Backend"] for r in rows}
    assert all(float(r["Latency"]) > 0 for r in rows)
    with open(out / "conv_fp32.csv") as f:
        conv = list(csv.DictReader(f))
    assert {r["Phase"] for r in conv} == {"fwd", "bwd_data", "bwd_weight"}
    assert {r["Layout"] for r in conv} == {"nchw"}
    with open(out / "conv_bf16.csv") as f:
        assert {r["Layout"] for r in csv.DictReader(f)} == {"nchw", "nhwc"}
    assert all(float(r["Kernel Latency"]) > 0 and float(r["Transform Latency"]) == 0 for r in conv)
    # each listed kernel (here: CPU ops) appears once
    assert all(len(r["Kernels"].split(";")) == len(set(r["Kernels"].split(";"))) for r in conv)
    log = capsys.readouterr().out
    assert "attention:" in log and "conv:" in log and "gemm:" not in log


def test_cpu_dry_run_grouped_and_1x1_convolutions_and_batch_norm(ck, tmp_path):
    from habitat.learned.neusight import load_precision_kernels
    out = tmp_path / "kernels"
    log = _main(ck, "--out", str(out), "--families", "gconv,pointwise,batchnorm", "--budget-s", "600")
    assert "gconv:" in log and "pointwise:" in log and "batchnorm:" in log and "conv:" not in log.replace("gconv:", "")
    assert {p.stem for p in out.glob("*.csv")} == {f"{s}_{p}" for s in ("gconv", "conv1x1") for p in
                                                   ("fp32", "tf32", "bf16")} | {"bn_fp32", "bn_bf16"}
    conv_columns = ["B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"]
    with open(out / "gconv_bf16.csv") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames[-9:] == conv_columns + ["Groups", "Layout"]
        rows = list(reader)
    assert {r["OPName"] for r in rows} == {"gconv"} and {r["Layout"] for r in rows} == {"nchw", "nhwc"}
    assert {r["Phase"] for r in rows} == {"fwd", "bwd_data", "bwd_weight"}
    assert all(float(r["Kernel Latency"]) > 0 and int(r["Input_Channel"]) % int(r["Groups"]) == 0 for r in rows)
    with open(out / "bn_fp32.csv") as f:
        bn = list(csv.DictReader(f))
    assert {(r["Phase"], r["Layout"]) for r in bn} == {(p, lay) for p in ("fwd", "fwd+bwd") for lay in ("nchw", "nhwc")}
    # 1x1 rows are dense conv rows: the loader reads them with the conv family's; grouped ones it leaves
    conv = load_precision_kernels(out, timing="kernel")["conv"]
    conv1x1 = [r for p in ("fp32", "tf32", "bf16") for r in csv.DictReader(open(out / f"conv1x1_{p}.csv"))]
    assert len(conv) == len(conv1x1) and set(conv.shapes["kernel"].tolist()) == {1.0}


def test_cpu_dry_run_memory_bound_families_load_as_training_rows(ck, tmp_path):
    from habitat.learned.neusight import load_precision_kernels
    out = tmp_path / "kernels"
    assert ck.main(["--device", "cpu", "--dry-run", "--out", str(out), "--families", "conv,elementwise,layernorm",
                    "--budget-s", "60"]) == 0
    with open(out / "ln_fp32.csv") as f:
        assert {r["Phase"] for r in csv.DictReader(f)} == {"fwd", "bwd"}
    with pytest.warns(UserWarning, match="Layout nhwc skipped"):
        tables = load_precision_kernels(out)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no conv asked for: no word about its layouts
        assert set(load_precision_kernels(out, {"ln"})) == {"layernorm"}
    # channels-last conv rows are skipped (the trainers strip NCHW transforms from every row)
    n_nchw = sum(1 for name in ("conv_fp32", "conv_tf32", "conv_bf16")
                 for r in csv.DictReader(open(out / f"{name}.csv")) if r["Layout"] == "nchw")
    assert len(tables["conv"]) == n_nchw
    # a backward layer norm is not a layer norm row; 16-bit rows keep their element width
    ln = tables["layernorm"]
    assert set(ln.op.tolist()) == {"ln"} and len(ln) == 2 * 2  # 2 shapes x fp32, bf16; fwd only
    ew = tables["elementwise"]
    assert set(zip(ew.precision.tolist(), ew.shapes["elem_bytes"].tolist())) == {("fp32", 4.0), ("bf16", 2.0)}
    # device-time rows (Kernel Latency) for the trace trainer: prefixed ops, no workload's
    from habitat.learned import traces
    kernel_rows = traces.collection_rows(out, "layernorm")
    with open(out / "ln_fp32.csv") as f:
        fwd = [r for r in csv.DictReader(f) if r["Phase"] == "fwd"]
    assert set(kernel_rows.rows.op.tolist()) == {"kernels:ln"} and set(kernel_rows.workload) == {"kernels"}
    assert sorted(kernel_rows.rows.latency_us[kernel_rows.rows.precision == "fp32"]) == pytest.approx(
        sorted(float(r["Kernel Latency"]) * 1000 for r in fwd))
    assert traces.collection_rows(out, "softmax") is None  # not collected in this run
    with pytest.raises(ValueError, match="timing must be one of"):
        load_precision_kernels(out, timing="wall")
    # the H100 collection of 2026-11-22 predates the device-time column
    with pytest.raises(ValueError, match="no 'Kernel Latency' column"):
        load_precision_kernels(ROOT / "benchmarks" / "results" / "kernels" / "H100-SXM5-80GB", {"linear"}, "kernel")


def test_device_time_rows_train_gemm_conv_and_attention_without_a_harness_floor(ck, tmp_path):
    """A collection read with timing 'kernel' (CUPTI device time, transforms measured out):
    every layout is read, and the matrix trainer fits no harness floor to it. The rows come from
    a CPU dry run, relabelled as an H100's (their times are CPU times: only the path is tested)."""
    from habitat.learned.devices import default_table
    from habitat.learned.fitting import DEVICE_TIME_FLOOR_US, TrainConfig
    from habitat.learned.neusight import load_attention, load_precision_kernels
    from habitat.learned.train_precision import train_matrix_family
    out = tmp_path / "kernels"
    assert ck.main(["--device", "cpu", "--dry-run", "--out", str(out), "--families", "gemm,conv,attention",
                    "--budget-s", "90", "--seed", "3"]) == 0
    for path in out.glob("*.csv"):
        with open(path) as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            r["Device"] = "NVIDIA H100 80GB HBM3"
            r["Transform Latency"] = str(float(r["Kernel Latency"]) / 4) if r["OPName"] == "conv" else "0"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    measured = load_precision_kernels(out, timing="kernel")  # no warning: channels-last rows are read
    conv_csv = [r for name in ("conv_fp32", "conv_tf32", "conv_bf16") for r in csv.DictReader(open(out / f"{name}.csv"))]
    assert len(measured["conv"]) == len(conv_csv)
    assert sorted(measured["conv"].latency_us) == pytest.approx(sorted(0.75e3 * float(r["Kernel Latency"]) for r in conv_csv))
    attention = load_attention(out, "kernel")
    assert attention is not None and len(attention) > 0
    assert "attention" not in measured  # sdpa_<precision>.csv are load_attention's
    cfg = TrainConfig(hidden=(8,), steps=100, batch=32, eval_every=50, clamp_inputs=False)
    for family in ("gemm", "conv"):
        m = train_matrix_family(None, measured[family], default_table(), cfg, test_fraction=0.25,
                                log=lambda s: None, device_time=True)
        floors = m.metadata["harness_floor_us"]
        assert "device time" in floors["measured_note"] and "fitted_floors" not in m.metadata
        assert all(v == DEVICE_TIME_FLOOR_US for per in floors["per_gpu"].values() for v in per.values())
        assert "CUPTI device time" in m.metadata["training_data"]["source"]
        assert m.metadata["validation_error_pct"]["held_out_shapes"]

# ----- run_gpu_benchmark.py: the parts that need no GPU ----------------------------------------
BENCH = ROOT / "benchmarks" / "gpu" / "run_gpu_benchmark.py"
RESULTS = ROOT / "benchmarks" / "results"
SUMMARIES = sorted(RESULTS.glob("*/summary.json"))


@pytest.fixture(scope="module")
def bench():
    # The script imports its neighbour `models` by that name; tests/python has a models.py too.
    saved = sys.modules.pop("models", None)
    spec = importlib.util.spec_from_file_location("run_gpu_benchmark", BENCH)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("models", None)
        if saved is not None:
            sys.modules["models"] = saved
        sys.path[:] = [p for p in sys.path if p != str(BENCH.parent)]


def test_benchmark_options_and_no_gpu(bench, tmp_path, capsys):
    args = bench.parse_args(["--quick", "--models", "dcgan"])
    assert (args.warmup, args.steps, args.overhead_steps, args.models) == (2, 5, 4, ["dcgan"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--models", "resnet5"])  # a misspelt model is an error, not a no-op
    import torch
    if not torch.cuda.is_available():
        assert bench.main(["--out", str(tmp_path)]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.skipif(not SUMMARIES, reason="no recorded GPU results in benchmarks/results")
@pytest.mark.parametrize("summary", SUMMARIES, ids=lambda p: p.parent.name)
def test_benchmark_coverage_and_table_from_recorded_runs(bench, summary):
    """kernel_coverage() on each recorded trace, re-forecast on CPU, gives back what the GPU
    run recorded; markdown() renders the recorded summary."""
    import gzip
    import json

    import habitat

    doc = json.loads(summary.read_text())
    env, results = doc["environment"], doc["results"]
    assert {r["model"] for r in results} == {w.name for w in bench.WORKLOADS}
    for r in results:
        with gzip.open(summary.parent / r["trace"], "rt", encoding="utf-8") as f:
            trace = json.load(f)
        step = habitat.Forecast.from_trace(trace, targets=[env["gpu"]]).latest
        got, want = bench.kernel_coverage(step), r["coverage"]
        # An op the recorded run listed as launching no kernel may since be known to launch
        # none (aten::cudnn_is_acceptable, a backend query): it leaves the leaf CUDA ops.
        assert set(got["missing"]) <= set(want["missing"])
        dropped = sum(n for name, n in want["missing"].items() if name not in got["missing"])
        assert (got["leaf_cuda_ops"], got["with_kernels"]) == (want["leaf_cuda_ops"] - dropped, want["with_kernels"])
        assert got["kernel_sum_ms"] == pytest.approx(want["kernel_sum_ms"], rel=1e-9)
    table = bench.markdown(env, results + [{"model": "x", "precision": "fp32", "error": "boom"}])
    assert table.count("\n| ") == len(results) + 2 and "error: boom" in table
    assert (summary.parent / "summary.md").read_text().splitlines()[4:] == \
        bench.markdown(env, results).splitlines()[4:]


def test_cases_past_the_deadline_are_left_out(ck):
    case = sys.modules["kernel_case"].Case
    warm_up = sys.modules["kernel_measure"].warm_up
    ran = []
    cases = [case("bmm", "fwd", "fp32", {"B": i}, lambda i=i: ran.append(i)) for i in range(3)]
    assert warm_up(cases, "cpu", 1, deadline=0.0) == [] and ran == []
    failing = case("sdpa", "fwd", "fp32", {}, lambda: (_ for _ in ()).throw(RuntimeError("no kernel")))
    assert warm_up(cases + [failing], "cpu", 2) == cases and ran == [0, 0, 1, 1, 2, 2]
