"""The GPU kernel collector's CPU-side parts: options, budget split, passes, and a CPU dry run of
the whole script (every family, tiny shapes) whose CSVs have the documented columns and load
into the learned models' tables. (Shapes: test_collect_kernels_shapes.py; cases:
test_collect_kernels_cases.py; kernels of a run: test_collect_kernels_trace.py.)"""
from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import io
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import loaded_script

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "benchmarks" / "gpu" / "README.md"
PRECISIONS = ("fp32", "bf16")
CONV_PRECISIONS = ("fp32", "tf32", "bf16")
CONV_COLUMNS = ["B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"]
NEUSIGHT_OPS = ("add", "mul", "div", "addu", "mulu", "relu", "gelu", "tanh")
ACTIVATIONS = {"relu", "relu6", "gelu", "gelu_tanh", "silu", "hardswish", "hardsigmoid", "sigmoid", "tanh"}
# What each family writes, as documented (the module docstring, benchmarks/gpu/README.md):
# family -> (file stems, precisions, OPNames, phases, shape columns in order)
DOCUMENTED = {
    "gemm": (("bmm", "linear"), ("fp32", "tf32", "bf16", "fp16"), {"bmm", "linear"}, {"fwd"}, ["B", "M", "N", "K"]),
    "conv": (("conv",), CONV_PRECISIONS, {"conv"}, {"fwd", "bwd_data", "bwd_weight"}, CONV_COLUMNS + ["Layout"]),
    "attention": (("sdpa",), ("bf16", "fp16", "fp32"), {"sdpa"}, {"fwd", "fwd+bwd"},
                  ["B", "H", "L", "S", "E", "Causal", "Backend"]),
    "elementwise": (NEUSIGHT_OPS, PRECISIONS, set(NEUSIGHT_OPS), {"fwd"}, ["B", "H"]),
    "layernorm": (("ln",), PRECISIONS, {"ln"}, {"fwd", "bwd"}, ["B", "H"]),
    "softmax": (("softmax",), PRECISIONS, {"softmax"}, {"fwd", "bwd"}, ["B", "H"]),
    "reduction": (("sum", "mean"), PRECISIONS, {"sum", "mean"}, {"fwd"}, ["B", "H", "Dim"]),
    "batchnorm": (("bn",), PRECISIONS, {"bn"}, {"fwd", "fwd+bwd"}, ["B", "Input_Channel", "Input_Size", "Layout"]),
    "gconv": (("gconv",), CONV_PRECISIONS, {"gconv"}, {"fwd", "bwd_data", "bwd_weight"},
              CONV_COLUMNS + ["Groups", "Layout"]),
    "pointwise": (("conv1x1",), CONV_PRECISIONS, {"conv"}, {"fwd", "bwd_data", "bwd_weight"}, CONV_COLUMNS + ["Layout"]),
    "activation": (("activation",), PRECISIONS, ACTIVATIONS, {"fwd", "bwd"}, ["B", "H"]),
    "embedding": (("embedding",), PRECISIONS, {"embedding"}, {"fwd", "bwd"}, ["Vocab", "Dim", "Tokens"]),
    "crossentropy": (("crossentropy",), PRECISIONS, {"cross_entropy", "log_softmax", "nll_loss"},
                     {"fwd", "fwd+bwd", "bwd"}, ["Tokens", "Classes"]),
    "adamw": (("adamw",), PRECISIONS, {"adamw"}, {"step"}, ["Tensors", "Elements", "Largest", "Chunks", "Impl"]),
    "stem": (("convstem",), CONV_PRECISIONS, {"conv"}, {"fwd", "bwd_data", "bwd_weight"}, CONV_COLUMNS + ["Layout"]),
    "encoder": (("sdpa_enc",), ("bf16", "fp16", "fp32"), {"sdpa", "sdpa_mask", "sdpa_dropout"}, {"fwd", "fwd+bwd"},
                ["B", "H", "L", "S", "E", "Causal", "Backend", "Mask", "Dropout"]),
    "rmsnorm": (("rms",), PRECISIONS, {"rms"}, {"fwd", "bwd"}, ["B", "H"]),
    "largenorm": (("ln_large", "rms_large", "softmax_large"), PRECISIONS, {"ln", "rms", "softmax"}, {"fwd", "bwd"},
                  ["B", "H"]),
    "conv3d": (("conv3d",), CONV_PRECISIONS, {"conv3d"}, {"fwd", "bwd_data", "bwd_weight"},
               CONV_COLUMNS + ["Depth", "Layout"]),
    "vocab": (("linearvocab",), ("fp32", "tf32", "bf16", "fp16"), {"linear"}, {"fwd"}, ["B", "M", "N", "K"]),
    "multitensor": (("multitensor",), PRECISIONS, {"sgd", "amp_unscale", "clip_grad_norm"}, {"step"},
                    ["Tensors", "Elements", "Largest", "Chunks", "Impl"]),
    "netgemm": (("gemmnet",), ("fp32", "tf32", "bf16", "fp16"), {"linear", "bmm"}, {"fwd"}, ["B", "M", "N", "K"]),
}


@pytest.fixture(scope="module")
def ck():
    with loaded_script("benchmarks/gpu/collect_kernels.py", "collect_kernels") as module:
        yield module


def _main(ck, *argv: str) -> str:
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        assert ck.main(["--device", "cpu", "--dry-run", *argv]) == 0
    return log.getvalue()


@pytest.fixture(scope="module")
def dry_run(ck, tmp_path_factory):
    """One CPU dry run of every family: its directory and its log (a budget no family runs out of)."""
    out = tmp_path_factory.mktemp("dry_run") / "kernels"
    return out, _main(ck, "--out", str(out), "--budget-s", "36000")


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_families_option(ck):
    assert ck.parse_args(["--out", "x"]).families == tuple(DOCUMENTED)
    assert ck.parse_args(["--out", "x", "--families", "attention, gemm"]).families == ("attention", "gemm")
    assert ck.parse_args(["--out", "x", "--families", "gconv,batchnorm,gconv"]).families == ("gconv", "batchnorm")
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


def test_family_shapes_do_not_depend_on_the_families_before(ck):
    a = ck.FAMILIES["batchnorm"].shapes(30, ck.family_rng(0, "batchnorm"))
    ck.FAMILIES["gconv"].shapes(30, ck.family_rng(0, "gconv"))
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


def test_cpu_dry_run_of_every_family_writes_the_documented_files(ck, dry_run):
    out, log = dry_run
    files = {p.stem: p for p in out.glob("*.csv")}
    expected = {f"{stem}_{p}" for stems, precs, *_ in DOCUMENTED.values() for stem in stems for p in precs}
    assert set(files) == expected
    base = sys.modules["kernel_rows"].BASE_COLUMNS
    doc, readme = ck.__doc__, README.read_text()
    for family, (stems, precisions, ops, phases, columns) in DOCUMENTED.items():
        assert f"{family}:" in log and f"{family}: 0 measurements" not in log
        found_ops, found_phases = set(), set()
        for stem in stems:
            for prec in precisions:
                header, rows = _rows(files[f"{stem}_{prec}"])
                assert header == base + columns, (stem, prec)
                assert rows and {r["Precision"] for r in rows} == {prec}
                assert all(float(r["Kernel Latency"]) > 0 and float(r["Latency"]) > 0 for r in rows), (stem, prec)
                # each listed kernel (here: CPU ops) appears once
                assert all(len(r["Kernels"].split(";")) == len(set(r["Kernels"].split(";"))) for r in rows)
                found_ops |= {r["OPName"] for r in rows}
                found_phases |= {r["Phase"] for r in rows}
            assert f"{stem}_" in readme, f"{stem}_* not in {README.name}"
        assert (found_ops, found_phases) == (ops, phases), family
        for column in columns:
            assert column in doc and f"`{column}`" in readme, f"{family}: column {column} undocumented"
    assert re.findall(r"(\d+) failed to build", log) == ["0"] * len(DOCUMENTED)


def test_cpu_dry_run_rows(dry_run):
    out, _ = dry_run
    _, sdpa = _rows(out / "sdpa_fp32.csv")
    assert {r["Causal"] for r in sdpa} == {"0", "1"} and "math" in {r["Backend"] for r in sdpa}
    _, conv = _rows(out / "conv_fp32.csv")
    assert {r["Layout"] for r in conv} == {"nchw"}
    assert all(float(r["Transform Latency"]) == 0 for r in conv)
    _, bf16 = _rows(out / "gconv_bf16.csv")
    assert {r["Layout"] for r in bf16} == {"nchw", "nhwc"}
    assert all(int(r["Input_Channel"]) % int(r["Groups"]) == 0 for r in bf16)
    _, adamw = _rows(out / "adamw_bf16.csv")
    assert {r["Impl"] for r in adamw} == {"fused", "foreach"}
    _, bn = _rows(out / "bn_fp32.csv")
    assert {(r["Phase"], r["Layout"]) for r in bn} == {(p, lay) for p in ("fwd", "fwd+bwd") for lay in ("nchw", "nhwc")}


def test_dry_run_writes_the_selected_families_and_keeps_earlier_files(ck, tmp_path):
    out = tmp_path / "kernels"
    log = _main(ck, "--out", str(out), "--families", "embedding,reduction", "--budget-s", "600")
    assert {p.stem for p in out.glob("*.csv")} == {f"{s}_{p}" for s in ("embedding", "sum", "mean") for p in PRECISIONS}
    assert "embedding:" in log and "reduction:" in log and "gemm:" not in log
    _, first = _rows(out / "embedding_fp32.csv")
    # a second call into the directory (another family, then the same one again) keeps every row
    log = _main(ck, "--out", str(out), "--families", "embedding", "--budget-s", "600", "--seed", "5")
    assert "keeping the" in log
    _, both = _rows(out / "embedding_fp32.csv")
    key = ("Vocab", "Dim", "Tokens", "Phase")
    assert [tuple(r[k] for k in key) for r in both[:len(first)]] == [tuple(r[k] for k in key) for r in first]
    assert len(both) == 2 * len(first) and len(_rows(out / "sum_fp32.csv")[1]) > 0


def _copy(src: Path, dst: Path, stems: tuple[str, ...]) -> Path:
    """The files <stem>_<precision>.csv of `stems` (not ln_large_* for ln)."""
    dst.mkdir(parents=True)
    for stem in stems:
        for path in src.glob(f"{stem}_*.csv"):
            if path.stem.rpartition("_")[0] == stem:
                shutil.copy(path, dst / path.name)
    return dst


def test_cpu_dry_run_memory_bound_families_load_as_training_rows(dry_run, tmp_path):
    from habitat.learned import sources
    from habitat.learned.devices import default_table
    from habitat.learned.neusight import load_precision_kernels
    out = _copy(dry_run[0], tmp_path / "kernels", ("conv", "ln") + NEUSIGHT_OPS)
    with open(out / "ln_fp32.csv") as f:
        assert {r["Phase"] for r in csv.DictReader(f)} == {"fwd", "bwd"}
    tables = load_precision_kernels(out)
    # every layout is read (the trainers take each row's measured or modelled transforms out)
    n_conv = sum(1 for name in ("conv_fp32", "conv_tf32", "conv_bf16") for _ in csv.DictReader(open(out / f"{name}.csv")))
    assert len(tables["conv"]) == n_conv
    # a backward layer norm is a layer-norm row of its own; 16-bit rows keep their element width
    ln = tables["layernorm"]
    assert set(ln.op.tolist()) == {"ln", "ln_bwd"} and len(ln) == 2 * 2 * 2  # 2 shapes x fp32, bf16 x fwd, bwd
    assert sorted(set(ln.shapes["backward"].tolist())) == [0.0, 1.0]
    ew = tables["elementwise"]
    assert set(zip(ew.precision.tolist(), ew.shapes["elem_bytes"].tolist())) == {("fp32", 4.0), ("bf16", 2.0)}
    # device-time rows (Kernel Latency) as a training source: no floor, one measurement each
    kernel_rows = sources.collection(out, "layernorm", default_table())
    with open(out / "ln_fp32.csv") as f:
        fp32 = list(csv.DictReader(f))
    assert set(kernel_rows.floor_key) == {""} and set(kernel_rows.rows.timing) == {"device"}
    assert sorted(kernel_rows.rows.latency_us[kernel_rows.rows.precision == "fp32"]) == pytest.approx(
        sorted(float(r["Kernel Latency"]) * 1000 for r in fp32))
    assert sources.collection(out, "softmax", default_table()) is None  # not collected in this run
    with pytest.raises(ValueError, match="timing must be one of"):
        load_precision_kernels(out, timing="wall")
    # the H100 collection of 2026-11-22 predates the device-time column
    with pytest.raises(ValueError, match="no 'Kernel Latency' column"):
        load_precision_kernels(ROOT / "benchmarks" / "results" / "kernels" / "H100-SXM5-80GB", {"linear"}, "kernel")


def test_new_families_files_load_beside_the_known_ones(dry_run):
    """The loader reads a whole collection: 1x1, grouped (not depthwise: the roofline table's)
    convolutions, patch embeddings and 3-D convolutions (as their square stand-ins) as conv
    rows, the activation family's relu, gelu and tanh forward rows as element-wise rows; the rest
    (the backward ops, batch norm, embedding, losses, AdamW) waits for its models."""
    from habitat.learned.neusight import is_depthwise, load_precision_kernels
    out = dry_run[0]
    tables = load_precision_kernels(out, timing="kernel")
    conv = [r for stem in ("conv", "conv1x1", "convstem", "conv3d", "gconv") for p in CONV_PRECISIONS
            for r in _rows(out / f"{stem}_{p}.csv")[1] if not is_depthwise(r)]
    assert len(tables["conv"]) == len(conv)
    assert {"conv3d", "conv3d_bwd_data", "conv3d_bwd_weight", "gconv"} <= set(tables["conv"].op.tolist())
    grouped = tables["conv"].op == "gconv"
    assert (tables["conv"].shapes["groups"][grouped] > 1).all()
    assert (tables["conv"].shapes["groups"][~np.char.startswith(tables["conv"].op.astype(str), "gconv")] == 1).all()
    elementwise = [r for stem in NEUSIGHT_OPS for p in PRECISIONS for r in _rows(out / f"{stem}_{p}.csv")[1]]
    activations = [r for p in PRECISIONS for r in _rows(out / f"activation_{p}.csv")[1]
                   if r["Phase"] == "fwd" and r["OPName"] in NEUSIGHT_OPS]
    assert len(tables["elementwise"]) == len(elementwise) + len(activations) > len(elementwise)
    # fused RMS norm rows are layer-norm rows (the same kernels); the large ones too
    norms = [r for stem in ("ln", "rms", "ln_large", "rms_large") for p in PRECISIONS
             for r in _rows(out / f"{stem}_{p}.csv")[1]]
    assert len(tables["layernorm"]) == len(norms) and {"rms", "rms_bwd"} <= set(tables["layernorm"].op.tolist())
    # a language-model head's GEMMs and transformer layers' are rows of the GEMM model
    gemm = [r for stem in ("bmm", "linear", "linearvocab", "gemmnet") for p in ("fp32", "tf32", "bf16", "fp16")
            for r in _rows(out / f"{stem}_{p}.csv")[1]]
    assert len(tables["gemm"]) == len(gemm) and "linear" in set(tables["gemm"].op.tolist())


def test_device_time_rows_train_gemm_conv_and_attention_without_a_harness_floor(dry_run, tmp_path):
    """A collection read with timing 'kernel' (CUPTI device time, transforms measured out):
    every layout is read, and the trainer fits no harness floor to it. The rows come from a CPU
    dry run, relabelled as an H100's (their times are CPU times: only the path is tested)."""
    import json

    from habitat.learned.neusight import load_attention, load_precision_kernels
    from habitat.learned.train import main as train_main
    out = _copy(dry_run[0], tmp_path / "kernels", ("bmm", "linear", "conv", "sdpa"))
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
    measured = load_precision_kernels(out, timing="kernel")
    conv_csv = [r for name in ("conv_fp32", "conv_tf32", "conv_bf16") for r in csv.DictReader(open(out / f"{name}.csv"))]
    assert len(measured["conv"]) == len(conv_csv)
    assert sorted(measured["conv"].latency_us) == pytest.approx(sorted(0.75e3 * float(r["Kernel Latency"]) for r in conv_csv))
    attention = load_attention(out, "kernel")
    assert attention is not None and len(attention) > 0
    assert "attention" not in measured  # sdpa_<precision>.csv are load_attention's
    weights = tmp_path / "w"
    assert train_main(["--quick", "--no-logo", "--families", "gemm,conv", "--collections", str(out),
                       "--out", str(weights)]) == 0
    for family in ("gemm", "conv"):
        meta = json.loads((weights / f"{family}.json").read_text())
        assert meta["fitted_floors_us"] == {} and meta["harness_floor_us"]["per_gpu"] == {}
        assert meta["training_data"]["sources"] == {"collection:kernels": meta["training_data"]["sources"]["collection:kernels"]}


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
    recorded = (summary.parent / "summary.md").read_text().splitlines()
    rendered = bench.markdown(env, results).splitlines()
    if all("fingerprinted_overhead_pct" in r["overhead"] for r in results):
        assert recorded[4:] == rendered[4:]
    else:  # recorded before the steady-state overhead columns: the cells both tables have
        for old, new in zip(recorded[6:6 + len(results)], rendered[6:6 + len(results)]):
            assert old.split(" | ")[:6] == new.split(" | ")[:6]
            assert new.split(" | ")[6].startswith(old.split(" | ")[6].rstrip(" |"))


def test_cases_past_the_deadline_are_left_out(ck):
    case = sys.modules["kernel_case"].Case
    warm_up = sys.modules["kernel_measure"].warm_up
    ran = []
    cases = [case("bmm", "fwd", "fp32", {"B": i}, lambda i=i: ran.append(i)) for i in range(3)]
    assert warm_up(cases, "cpu", 1, deadline=0.0) == [] and ran == []
    failing = case("sdpa", "fwd", "fp32", {}, lambda: (_ for _ in ()).throw(RuntimeError("no kernel")))
    assert warm_up(cases + [failing], "cpu", 2) == cases and ran == [0, 0, 1, 1, 2, 2]
