"""Which kernels belong to which run (benchmarks/gpu/kernel_trace.py), on synthetic Kineto
events, and the CSV rows made of them (kernel_rows.py)."""
from __future__ import annotations

import csv
import sys
from types import SimpleNamespace

import pytest
from bench_scripts import loaded_script


@pytest.fixture(scope="module")
def kt():
    with loaded_script("benchmarks/gpu/collect_kernels.py", "collect_kernels"):
        yield sys.modules["kernel_trace"]


@pytest.fixture(scope="module")
def kr():
    with loaded_script("benchmarks/gpu/collect_kernels.py", "collect_kernels"):
        yield sys.modules["kernel_rows"]


def Case(op: str, phase: str, precision: str, shape: dict) -> SimpleNamespace:
    """What make_row reads of a kernel_case.Case."""
    return SimpleNamespace(op=op, phase=phase, precision=precision, shape=shape)


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


def test_backward_kernels_launched_by_autograd_belong_to_their_run(kt, kr):
    """The bug of the 2026-11-26 collection: every SDPA fwd+bwd row's Kernel Latency equalled
    its fwd row's, as the kernels were taken from the GPU span of the case's record_function,
    which autograd's thread never enters. Launched from any thread inside the run's CPU span,
    they are the run's."""
    events = _sdpa_fwd_bwd_trace()
    gpu_span = next(e for e in events if e["cat"] == "gpu_user_annotation")
    inside = [e["name"] for e in events if e["cat"] == "kernel"
              and gpu_span["ts"] <= e["ts"] <= gpu_span["ts"] + gpu_span["dur"]]
    assert inside == ["flash_fwd_kernel"]  # what the old rule found
    runs = kt.assign_kernels(events, 2, "cuda")
    names = ["flash_fwd_kernel", "flash_bwd_dot_do_o_kernel", "flash_bwd_dq_dk_dv_loop_kernel",
             "flash_bwd_convert_dq_kernel"]
    assert [[k["name"] for k in run] for run in runs] == [names, names]
    assert kr.kernel_latency_ms([runs[0]]) == pytest.approx((30 + 10 + 100 + 5) / 1000)
    assert kr.kernel_latency_ms(runs) == pytest.approx((30 + 10 + 100.5 + 5) / 1000)


def test_batch_norm_backward_kernels_and_kernels_without_a_launch_record(kt, kr):
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
    r0, r1 = kt.assign_kernels(events, 2, "cuda")
    assert [k["name"] for k in r0] == ["bn_fw_tr_1C11_kernel_NCHW", "bn_bw_1C11_kernel_new", "bn_bw_1C11_singleread"]
    assert [k["dur"] for k in r1] == [41, 61]


def test_kernels_of_the_measured_run_only(kt, kr):
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
    k0, k1, k2 = kt.assign_kernels(events, 3, "cuda")
    assert [k["name"] for k in k0] == ["nchwToNhwc", "implicit_gemm", "nchwToNhwc"]
    assert kr.unique_names(k0) == ["nchwToNhwc", "implicit_gemm"]
    assert [k["name"] for k in k1] == ["gemm"] and k2 == []

    case = Case("conv", "fwd", "bf16", {"B": 2, "Input_Channel": 8})
    meta = {"Device": "X", "Torch Version": "t", "CUDNN Version": 1, "CUDA Version": "c"}
    row = kr.make_row(case, 0.5, [k0], meta, sms=132)
    assert row["Kernel Name"] == "implicit_gemm"
    # device time: every kernel of the run (2 + 30 + 2 us), and the layout transforms alone
    assert row["Kernel Latency"] == pytest.approx(0.034) and row["Transform Latency"] == pytest.approx(0.004)
    assert row["Kernels"] == ";nchwToNhwc;implicit_gemm"
    assert (row["Grid x"], row["Grid y"], row["Block x"]) == (66, 2, 128)
    assert row["Blocks per SM"] == pytest.approx(132 / 132)
    assert row["Warps per SM"] == pytest.approx(132 * 4 / 132)
    empty = kr.make_row(case, 0.5, [], meta, sms=132)
    assert empty["Kernels"] == ";" and empty["Kernel Name"] == "" and empty["Kernel Latency"] == 0.0


def test_kernel_latency_is_the_median_over_profiled_runs(kt, kr):
    # Runs i * runs + r: case 0's three runs, then case 1's; the median run wins, not the mean.
    durations = [10, 12, 50, 7, 7, 9]
    events = [e for i, d in enumerate(durations)
              for e in _run(i, 100 * i, 20) + [_launch(i, 100 * i + 1), _kernel("k", 100 * i + 2, d, i)]]
    spans = kt.assign_kernels(events, 6, "cuda")
    runs = [spans[0:3], spans[3:6]]
    assert kr.kernel_latency_ms(runs[0]) == pytest.approx(0.012)
    assert kr.kernel_latency_ms(runs[1]) == pytest.approx(0.007)
    assert kr.kernel_latency_ms(runs[1], kr.is_transform) == 0.0
    assert kr.is_transform("void cudnn::engines_precompiled::nhwcToNchwKernel<float>") and not kr.is_transform("sm90_xmma")


def test_cpu_ops_count_once_when_nested(kt, kr):
    events = [{"cat": "user_annotation", "name": "habitat_case_0", "ts": 0, "dur": 100},
              {"cat": "cpu_op", "name": "aten::linear", "tid": 1, "ts": 1, "dur": 50},
              {"cat": "cpu_op", "name": "aten::addmm", "tid": 1, "ts": 2, "dur": 40},  # inside linear
              {"cat": "cpu_op", "name": "aten::mul", "tid": 2, "ts": 3, "dur": 5},  # another thread's
              {"cat": "cpu_op", "name": "aten::relu", "tid": 1, "ts": 60, "dur": 10},
              {"cat": "cpu_op", "name": "aten::add", "tid": 1, "ts": 120, "dur": 10}]  # after the run
    (ops,) = kt.assign_kernels(events, 1, "cpu")
    assert [k["name"] for k in ops] == ["aten::linear", "aten::mul", "aten::relu"]
    assert kr.kernel_latency_ms([ops]) == pytest.approx(0.065)


def test_write_rows_appends_to_an_earlier_runs_files(kr, tmp_path):
    meta = {"Device": "X", "Torch Version": "t", "CUDNN Version": "", "CUDA Version": ""}
    a = kr.make_row(Case("sdpa", "fwd", "bf16", {"B": 1, "H": 2, "Causal": 1, "Backend": "flash"}), 1.0, [], meta, 1)
    b = kr.make_row(Case("sdpa", "fwd+bwd", "bf16", {"B": 1, "H": 2, "Causal": 0, "Backend": "math"}), 2.0, [], meta, 1)
    out = tmp_path / "out"
    paths = kr.write_rows(out, {"sdpa_bf16": [a, b], "empty": []})
    assert [p.name for p in paths] == ["sdpa_bf16.csv"]
    with open(paths[0]) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[: len(kr.BASE_COLUMNS)] == kr.BASE_COLUMNS
    assert list(rows[0])[len(kr.BASE_COLUMNS):] == ["B", "H", "Causal", "Backend"]
    assert [(r["Phase"], r["Backend"], r["Latency"]) for r in rows] == [("fwd", "flash", "1.0"),
                                                                        ("fwd+bwd", "math", "2.0")]
    # a second run into the directory: the earlier rows first, then its own; a new column joins
    kept = kr.read_rows(out)
    c = kr.make_row(Case("sdpa", "fwd", "bf16", {"B": 4, "H": 2, "Causal": 0, "Backend": "cudnn", "Extra": 1}),
                    3.0, [], meta, 1)
    kr.write_rows(out, {"sdpa_bf16": [c], "ln_bf16": []}, kept)
    with open(paths[0]) as f:
        rows = list(csv.DictReader(f))
    assert [(r["B"], r["Backend"], r["Extra"]) for r in rows] == [("1", "flash", ""), ("1", "math", ""),
                                                                   ("4", "cudnn", "1")]
    assert not (out / "ln_bf16.csv").exists()



def _sync(ts: float, dur: float = 200) -> dict:
    return {"cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "tid": MAIN, "ts": ts, "dur": dur,
            "args": {"correlation": 900 + ts}}


def test_synchronizes_place_the_kernels_when_the_cpu_spans_clock_disagrees(kt):
    aligned = _sdpa_fwd_bwd_trace()
    want = kt.assign_kernels(aligned, 2, "cuda")
    assert kt.place_kernels(aligned, 2)[1] == "spans" and kt.trace_warnings(aligned, 2) == []
    # the CPU spans 3 ms late against CUPTI's clock: no launch inside any span
    skewed = [{**e, "ts": e["ts"] + 3000} if e["cat"] == "user_annotation" else e for e in aligned]
    assert kt.place_kernels(skewed, 2)[1] == "synchronizes"
    assert kt.assign_kernels(skewed, 2, "cuda") == want
    (note,) = kt.trace_warnings(skewed, 2)
    assert "synchronize after each run" in note
    # the profiler's own synchronize at its exit, or one before the first run, does not shift the runs
    for extra in (_sync(3000), _sync(500, 10)):
        assert kt.assign_kernels(skewed + [extra], 2, "cuda") == want
    # without a synchronize a run the runs cannot be told apart: the kernels are left out, and said so
    unsynced = [e for e in skewed if e.get("name") != "cudaDeviceSynchronize" or e["ts"] < 2000]
    assert kt.assign_kernels(unsynced, 2, "cuda") == [[], []]
    assert kt.trace_warnings(unsynced, 2) == ["8 kernels launched outside every case's run (left out)"]
