"""The GPU kernel collector's CPU-side parts: options, budget split, shapes, kernel lists, CSVs;
and a CPU dry run of the whole script (every family, tiny shapes)."""
from __future__ import annotations

import argparse
import csv
import importlib.util
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
                                                      "softmax", "reduction", "batchnorm")
    assert ck.parse_args(["--out", "x", "--families", "attention, gemm"]).families == ("attention", "gemm")
    assert ck.parse_args(["--out", "x", "--families", "conv,conv"]).families == ("conv",)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown families lstm"):
        ck.parse_families("gemm,lstm")
    with pytest.raises(SystemExit):
        ck.parse_args(["--out", "x", "--families", "pooling"])
    dry = ck.parse_args(["--out", "x", "--dry-run"])
    assert (dry.gemm, dry.conv, dry.attention, dry.memory, dry.repeats, dry.profiled_runs) == (4, 2, 2, 2, 3, 2)
    assert set(ck.FAMILY_WEIGHTS) == set(ck.FAMILIES) and sum(ck.FAMILY_WEIGHTS.values()) == pytest.approx(1.0)


def test_budget_reaches_every_family(ck):
    families = ["gemm", "conv", "attention"]
    w = ck.FAMILY_WEIGHTS
    first = ck.family_budget(100.0, "gemm", families)
    assert first == pytest.approx(100.0 * w["gemm"] / (w["gemm"] + w["conv"] + w["attention"]))
    # gemm used all of its share: the rest is split between conv and attention
    assert ck.family_budget(65.0, "conv", families[1:]) == pytest.approx(65.0 * w["conv"] / (w["conv"] + w["attention"]))
    # time left unused by earlier families goes to the last one; an overrun leaves it nothing
    assert ck.family_budget(80.0, "attention", families[2:]) == pytest.approx(80.0)
    assert ck.family_budget(-5.0, "attention", ["attention"]) == 0.0
    assert ck.family_budget(50.0, "attention", ["attention"]) == pytest.approx(50.0)


def test_shapes_are_reproducible_and_bounded(ck):
    g1, g2 = ck.gemm_shapes(40, random.Random(3)), ck.gemm_shapes(40, random.Random(3))
    assert g1 == g2
    assert {op for op, _ in g1} == {"bmm", "linear"}
    for op, s in g1:
        assert s["B"] * (s["M"] * s["N"] + s["N"] * s["K"] + s["M"] * s["K"]) <= 2**28
        assert op == "bmm" or s["B"] == 1
    for s in ck.conv_shapes(40, random.Random(1)):
        assert s["B"] * max(s["Input_Channel"], s["Output_Channel"]) * s["Input_Size"] ** 2 <= 2**27
        assert s["Padding"] == s["Kernel_Szie"] // 2 and s["Stride"] in (1, 2)
    shapes = ck.attention_shapes(200, random.Random(0))
    assert all(s["B"] * s["H"] * s["L"] * s["S"] <= 2**28 for s in shapes)
    assert {s["E"] for s in shapes} == {64, 128}
    assert any(s["L"] != s["S"] for s in shapes) and any(s["L"] == s["S"] for s in shapes)
    assert all(128 <= s["L"] <= 8192 for s in shapes)


def test_attention_cases_cover_backends_causal_and_phases(ck):
    import contextlib
    backends = {"flash": contextlib.nullcontext, "math": contextlib.nullcontext}
    cases = ck.attention_cases([{"B": 1, "H": 2, "L": 16, "S": 24, "E": 8}], "cpu", backends)
    keys = {(c.precision, c.shape["Backend"], c.shape["Causal"], c.phase) for c in cases}
    assert len(keys) == len(cases) == 3 * 2 * 2 * 2
    assert {c.file for c in cases} == {"sdpa_bf16", "sdpa_fp16", "sdpa_fp32"}
    fwd_bwd = next(c for c in cases if c.phase == "fwd+bwd" and c.precision == "fp32")
    dq, dk, dv = fwd_bwd.run()
    assert dq.shape == (1, 2, 16, 8) and dk.shape == dv.shape == (1, 2, 24, 8)
    assert set(ck.sdpa_backends()) <= set(ck.SDPA_BACKENDS)
    assert "math" in ck.sdpa_backends()


MAIN, AUTOGRAD = 100, 200  # thread ids: the caller's, autograd's CUDA device thread


def _run(i: int, ts: float, dur: float) -> list[dict]:
    """record_function("habitat_case_<i>")'s CPU span as Kineto exports it."""
    return [{"cat": "user_annotation", "name": f"habitat_case_{i}", "tid": MAIN, "ts": ts, "dur": dur}]


def _launch(corr: int, ts: float, tid: int = MAIN, cat: str = "cuda_runtime") -> dict:
    return {"cat": cat, "name": "cudaLaunchKernel", "tid": tid, "ts": ts, "dur": 3, "args": {"correlation": corr}}


def _kernel(name: str, ts: float, dur: float, corr: int | None = None, **args) -> dict:
    return {"cat": "kernel", "name": name, "ts": ts, "dur": dur,
            "args": {**({} if corr is None else {"correlation": corr}), **args}}


def _sdpa_fwd_bwd_trace() -> list[dict]:
    """Two runs of an SDPA fwd+bwd case, as the 2026-11-26 H100 collection recorded them: the
    forward launched by the caller's thread, the backward by autograd's thread; each run
    followed by a synchronize."""
    events = []
    for i, t in enumerate((1000, 2000)):
        c = 10 * i
        events += _run(i, t, 400) + [
            {"cat": "gpu_user_annotation", "name": f"habitat_case_{i}", "ts": t + 20, "dur": 30},
            _launch(c + 1, t + 10), _kernel("flash_fwd_kernel", t + 20, 30, c + 1),
            _launch(c + 2, t + 100, AUTOGRAD), _kernel("flash_bwd_dot_do_o_kernel", t + 110, 10, c + 2),
            _launch(c + 3, t + 150, AUTOGRAD), _kernel("flash_bwd_dq_dk_dv_loop_kernel", t + 160, 100 + i, c + 3),
            _launch(c + 4, t + 200, AUTOGRAD), _kernel("flash_bwd_convert_dq_kernel", t + 265, 5, c + 4),
            {"cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "tid": MAIN, "ts": t + 410, "dur": 200,
             "args": {"correlation": c + 5}}]
    return events


def test_backward_kernels_launched_by_autograd_belong_to_their_run(ck):
    """The bug of the 2026-11-26 collection: every SDPA fwd+bwd row's Kernel Latency equalled
    its fwd row's, as the kernels were taken from the GPU span of the case's record_function,
    which autograd's thread never enters. Launched from any thread inside the run's CPU span,
    they are the run's."""
    events = _sdpa_fwd_bwd_trace()
    gpu_span = next(e for e in events if e["cat"] == "gpu_user_annotation")
    inside = [e["name"] for e in events if e["cat"] == "kernel"
              and gpu_span["ts"] <= e["ts"] <= gpu_span["ts"] + gpu_span["dur"]]
    assert inside == ["flash_fwd_kernel"]  # what the old rule found
    runs = ck.assign_kernels(events, 2, "cuda")
    names = ["flash_fwd_kernel", "flash_bwd_dot_do_o_kernel", "flash_bwd_dq_dk_dv_loop_kernel",
             "flash_bwd_convert_dq_kernel"]
    assert [[k["name"] for k in run] for run in runs] == [names, names]
    assert ck.kernel_latency_ms([runs[0]]) == pytest.approx((30 + 10 + 100 + 5) / 1000)
    assert ck.kernel_latency_ms(runs) == pytest.approx((30 + 10 + 100.5 + 5) / 1000)


def test_batch_norm_backward_kernels_and_kernels_without_a_launch_record(ck):
    """Batch norm fwd+bwd: cuDNN launches through the driver API, the backward from autograd's
    thread. A kernel whose launch was not recorded is placed by its GPU start: after its run's
    start, before the next run's (each run ends with a synchronize), even when it starts after
    the run's CPU span ended."""
    events = _run(0, 1000, 300) + [
        _launch(1, 1010, cat="cuda_driver"), _kernel("bn_fw_tr_1C11_kernel_NCHW", 1020, 40, 1),
        _launch(2, 1100, AUTOGRAD, "cuda_driver"), _kernel("bn_bw_1C11_kernel_new", 1110, 60, 2),
        _kernel("bn_bw_1C11_singleread", 1320, 20),  # no launch record, GPU start after the CPU span
    ] + _run(1, 1500, 300) + [
        _launch(3, 1510, cat="cuda_driver"), _kernel("bn_fw_tr_1C11_kernel_NCHW", 1520, 41, 3),
        _launch(4, 1600, AUTOGRAD, "cuda_driver"), _kernel("bn_bw_1C11_kernel_new", 1610, 61, 4),
    ]
    r0, r1 = ck.assign_kernels(events, 2, "cuda")
    assert [k["name"] for k in r0] == ["bn_fw_tr_1C11_kernel_NCHW", "bn_bw_1C11_kernel_new", "bn_bw_1C11_singleread"]
    assert [k["dur"] for k in r1] == [41, 61]


def test_kernels_of_the_measured_run_only(ck):
    # Kernels before the first run (autotuning candidates) or launched between runs belong to
    # no run, and a kernel launched twice in one run is listed once.
    events = [
        _launch(1, 1), _kernel("autotune_candidate_a", 5, 5, 1),
        *_run(0, 100, 50),
        _launch(2, 100.5), _kernel("nchwToNhwc", 101, 2, 2, grid=[4, 1, 1], block=[256, 1, 1]),
        _launch(3, 102), _kernel("implicit_gemm", 110, 30, 3, grid=[66, 2, 1], block=[128, 1, 1]),
        _launch(4, 103), _kernel("nchwToNhwc", 145, 2, 4),
        _launch(5, 170), _kernel("stray", 171, 1, 5),  # launched after run 0's span ended
        *_run(1, 200, 10),
        _launch(6, 201), _kernel("gemm", 202, 9, 6),
    ]
    k0, k1, k2 = ck.assign_kernels(events, 3, "cuda")
    assert [k["name"] for k in k0] == ["nchwToNhwc", "implicit_gemm", "nchwToNhwc"]
    assert ck.unique_names(k0) == ["nchwToNhwc", "implicit_gemm"]
    assert [k["name"] for k in k1] == ["gemm"] and k2 == []

    case = ck.Case("conv", "fwd", "bf16", {"B": 2, "Input_Channel": 8}, lambda: None)
    meta = {"Device": "X", "Torch Version": "t", "CUDNN Version": 1, "CUDA Version": "c"}
    row = ck.make_row(case, 0.5, [k0], meta, sms=132)
    assert row["Kernel Name"] == "implicit_gemm"
    # device time: every kernel of the run (2 + 30 + 2 us), and the layout transforms alone
    assert row["Kernel Latency"] == pytest.approx(0.034) and row["Transform Latency"] == pytest.approx(0.004)
    assert row["Kernels"] == ";nchwToNhwc;implicit_gemm"
    assert (row["Grid x"], row["Grid y"], row["Block x"]) == (66, 2, 128)
    assert row["Blocks per SM"] == pytest.approx(132 / 132)
    assert row["Warps per SM"] == pytest.approx(132 * 4 / 132)
    empty = ck.make_row(case, 0.5, [], meta, sms=132)
    assert empty["Kernels"] == ";" and empty["Kernel Name"] == "" and empty["Kernel Latency"] == 0.0


def test_kernel_latency_is_the_median_over_profiled_runs(ck):
    # Runs i * runs + r: case 0's three runs, then case 1's; the median run wins, not the mean.
    durations = [10, 12, 50, 7, 7, 9]
    events = [e for i, d in enumerate(durations)
              for e in _run(i, 100 * i, 20) + [_launch(i, 100 * i + 1), _kernel("k", 100 * i + 2, d, i)]]
    spans = ck.assign_kernels(events, 6, "cuda")
    runs = [spans[0:3], spans[3:6]]
    assert ck.kernel_latency_ms(runs[0]) == pytest.approx(0.012)
    assert ck.kernel_latency_ms(runs[1]) == pytest.approx(0.007)
    assert ck.kernel_latency_ms(runs[1], ck.is_transform) == 0.0
    assert ck.is_transform("void cudnn::engines_precompiled::nhwcToNchwKernel<float>") and not ck.is_transform("sm90_xmma")


def test_cpu_ops_count_once_when_nested(ck):
    events = [{"cat": "user_annotation", "name": "habitat_case_0", "ts": 0, "dur": 100},
              {"cat": "cpu_op", "name": "aten::linear", "tid": 1, "ts": 1, "dur": 50},
              {"cat": "cpu_op", "name": "aten::addmm", "tid": 1, "ts": 2, "dur": 40},  # inside linear
              {"cat": "cpu_op", "name": "aten::mul", "tid": 2, "ts": 3, "dur": 5},  # another thread's
              {"cat": "cpu_op", "name": "aten::relu", "tid": 1, "ts": 60, "dur": 10},
              {"cat": "cpu_op", "name": "aten::add", "tid": 1, "ts": 120, "dur": 10}]  # after the run
    (ops,) = ck.assign_kernels(events, 1, "cpu")
    assert [k["name"] for k in ops] == ["aten::linear", "aten::mul", "aten::relu"]
    assert ck.kernel_latency_ms([ops]) == pytest.approx(0.065)


def test_memory_bound_cases_run_and_keep_their_shapes(ck):
    rng = random.Random(0)
    shapes = ck.memory_shapes(50, rng)
    assert all(s["B"] * s["H"] <= 2**25 for s in shapes) and max(s["H"] for s in shapes) > 1024
    one = [{"B": 3, "H": 8}]
    ew = ck.elementwise_cases(one, "cpu")
    assert {(c.op, c.precision) for c in ew} == {(op, p) for op in ck.ELEMENTWISE for p in ck.MEMORY_PRECISIONS}
    assert all(c.run().shape == (3, 8) for c in ew)
    ln = {(c.phase, c.precision): c for c in ck.layernorm_cases(one, "cpu")}
    dx, dw, db = ln["bwd", "fp32"].run()
    assert dx.shape == (3, 8) and dw.shape == db.shape == (8,)
    sm = {(c.phase, c.precision): c for c in ck.softmax_cases(one, "cpu")}
    assert sm["fwd", "bf16"].run().dtype == ck.torch.bfloat16 and sm["bwd", "fp32"].run().shape == (3, 8)
    sums = {c.shape["Dim"]: c.run() for c in ck.reduction_cases(one, "cpu") if c.precision == "fp32"}
    assert sums[1].shape == (3,) and sums[0].shape == (8,)
    bn = ck.batchnorm_cases([{"B": 2, "Input_Channel": 8, "Input_Size": 4}], "cpu")
    assert {(c.phase, c.precision, c.shape["Layout"]) for c in bn} == {
        (ph, p, lay) for ph in ("fwd", "fwd+bwd") for p in ck.MEMORY_PRECISIONS for lay in ("nchw", "nhwc")}
    nhwc = next(c for c in bn if c.phase == "fwd" and c.precision == "fp32" and c.shape["Layout"] == "nhwc")
    assert nhwc.run().is_contiguous(memory_format=ck.torch.channels_last)


def test_conv_cases_cover_tf32_and_channels_last(ck):
    cases = ck.conv_cases([{"B": 1, "Input_Channel": 8, "Output_Channel": 8, "Kernel_Szie": 3,
                            "Input_Size": 6, "Stride": 1, "Padding": 1}], "cpu")
    assert {(c.precision, c.shape["Layout"]) for c in cases} == set(ck.CONV_VARIANTS)
    assert len(cases) == 3 * len(ck.CONV_VARIANTS)
    fwd = next(c for c in cases if c.phase == "fwd" and c.shape["Layout"] == "nhwc" and c.precision == "tf32")
    assert fwd.run().is_contiguous(memory_format=ck.torch.channels_last)


def test_write_rows(ck, tmp_path):
    meta = {"Device": "X", "Torch Version": "t", "CUDNN Version": "", "CUDA Version": ""}
    a = ck.make_row(ck.Case("sdpa", "fwd", "bf16", {"B": 1, "H": 2, "Causal": 1, "Backend": "flash"},
                            lambda: None), 1.0, [], meta, 1)
    b = ck.make_row(ck.Case("sdpa", "fwd+bwd", "bf16", {"B": 1, "H": 2, "Causal": 0, "Backend": "math"},
                            lambda: None), 2.0, [], meta, 1)
    paths = ck.write_rows(tmp_path / "out", {"sdpa_bf16": [a, b], "empty": []})
    assert [p.name for p in paths] == ["sdpa_bf16.csv"]
    with open(paths[0]) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[: len(ck.BASE_COLUMNS)] == ck.BASE_COLUMNS
    assert list(rows[0])[len(ck.BASE_COLUMNS):] == ["B", "H", "Causal", "Backend"]
    assert [(r["Phase"], r["Backend"], r["Latency"]) for r in rows] == [("fwd", "flash", "1.0"),
                                                                        ("fwd+bwd", "math", "2.0")]


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
    ran = []
    cases = [ck.Case("bmm", "fwd", "fp32", {"B": i}, lambda i=i: ran.append(i)) for i in range(3)]
    assert ck.warm_up(cases, "cpu", 1, deadline=0.0) == [] and ran == []
    failing = ck.Case("sdpa", "fwd", "fp32", {}, lambda: (_ for _ in ()).throw(RuntimeError("no kernel")))
    assert ck.warm_up(cases + [failing], "cpu", 2) == cases and ran == [0, 0, 1, 1, 2, 2]
