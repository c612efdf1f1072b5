"""CUPTI kernel tracing: fallback behaviour everywhere, real tracing on a CUDA machine."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
import torch
from subprocess_env import subprocess_env

import habitat
from habitat import _C
from habitat.capture import cupti
from habitat.data import engine
from habitat.data.trace import tensor_args

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU fallback")


def attach_kernels(step: dict, kernels: cupti.StepKernels) -> int:
    """Puts each op's kernels into a trace step dict (what the C++ capture does at step end);
    returns how many kernels belong to ops the step does not hold. A test helper only."""
    known = set()
    for op in step.get("ops", []):
        known.add(op["id"])
        if op["id"] in kernels.ops:
            op["kernels"] = kernels.ops[op["id"]]
    return sum(len(v) for k, v in kernels.ops.items() if k not in known)


@pytest.fixture(autouse=True)
def fresh_warnings():
    cupti._warned.clear()
    yield
    cupti._warned.clear()


# ----- everywhere ---------------------------------------------------------------------

def test_exported_at_package_level():
    assert habitat.cupti_available is cupti.cupti_available


def test_status_is_a_clear_sentence():
    status = cupti.cupti_status()
    assert isinstance(status, str) and status
    if not _C.cupti_compiled():
        assert "CUPTI support was not compiled in" in status
        assert "no CUDA" in status


def test_step_kernels_from_flush_json_and_attach():
    doc = {
        "ok": True, "message": "", "nvtx_ranges": 0, "nvtx_sample": [],
        "ops": {"2": [{"name": "elementwise", "grid": [64, 1, 1], "block": [256, 1, 1],
                       "registers_per_thread": 16, "static_shared_bytes": 0,
                       "dynamic_shared_bytes": 0, "duration_us": 4.5, "stream": 7}],
                "9": [{"name": "orphan", "grid": [1, 1, 1], "block": [32, 1, 1],
                       "registers_per_thread": 8, "static_shared_bytes": 0,
                       "dynamic_shared_bytes": 0, "duration_us": 1.0, "stream": 7}]},
        "stats": {"kernels": 3, "attributed": 2, "unattributed": 1, "stale": 0, "incomplete": 0,
                  "dropped": 0, "overflow": 0, "lossless": True},
    }
    kernels = cupti.StepKernels.from_json(json.dumps(doc))
    assert set(kernels.ops) == {2, 9}
    assert kernels.problems() == []
    step = {"index": 0, "wall_ms": 1.0, "ops": [{"id": 1, "name": "aten::view"},
                                                {"id": 2, "name": "aten::relu"}]}
    assert attach_kernels(step, kernels) == 1  # op 9 is not in the step
    assert "kernels" not in step["ops"][0]
    assert step["ops"][1]["kernels"][0]["duration_us"] == 4.5


def test_problems_name_every_loss():
    kernels = cupti.StepKernels(ok=False, message="flush failed",
                                stats={"dropped": 3, "overflow": 1, "incomplete": 2, "stale": 4})
    text = " | ".join(kernels.problems())
    for word in ("flush failed", "dropped 3", "1 records exceeded", "2 kernels had not finished",
                 "4 kernels arrived after"):
        assert word in text


def test_flushed_kernels_drive_the_runtime_based_forecast():
    """Kernels in the flush format, attached to a step on a known GPU origin, are scaled
    by the engine's runtime-based path (wave scaling for an elementwise op)."""
    kernel = {"name": "vectorized_elementwise_kernel", "grid": [8192, 1, 1], "block": [128, 1, 1],
              "registers_per_thread": 16, "static_shared_bytes": 0, "dynamic_shared_bytes": 0,
              "duration_us": 30.0, "stream": 7}
    meta = {"shape": [4096, 1024], "dtype": "float32", "device": "cuda:0"}
    step = {"index": 0, "wall_ms": 1.0, "ops": [
        {"id": 1, "name": "aten::relu", "phase": "forward",
         "args": [{"name": "self", "tensor": meta}], "outputs": [meta]}]}
    attach_kernels(step, cupti.StepKernels(ops={1: [kernel]}))
    origin = {"device": "A100", "host": "test", "torch_version": torch.__version__,
              "habitat_version": habitat.__version__, "allow_tf32": False, "autocast": False}
    result = engine.forecast_step(origin, step, ["A100", "H100"])
    (a100, a100_method, a100_share, _), (h100, h100_method, _, _) = result["ops"][0]["predictions"]
    assert a100_method == h100_method == "wave_scaling"
    assert a100_share == a100  # the only op: its share is the whole step
    assert a100 == pytest.approx(30.0, rel=1e-6)  # origin -> itself is the measurement
    assert 0 < h100 < 30.0  # more bandwidth and SMs


def test_op_scope_is_harmless_without_tracing():
    with _C._OpScope(1, "aten::relu", "encoder.fc"):
        torch.relu(torch.ones(4))


# ----- CPU-only builds and machines ---------------------------------------------------

@cpu_only
def test_unavailable_without_a_gpu():
    assert cupti.cupti_available() is False
    assert cupti.origin_device() == "cpu"


@cpu_only
def test_tracing_is_quietly_off_without_a_gpu():
    # No GPU means no kernels to trace: the shape-based forecast is the expected path.
    tracing = cupti.KernelTracing()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            assert tracing.begin_step() is False
            assert tracing.end_step() is None
    tracing.close()


@pytest.mark.skipif(_C.cupti_compiled(), reason="checks the stub of a build without CUPTI")
def test_a_gpu_without_cupti_support_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cupti, "_warned", set())
    tracing = cupti.KernelTracing()
    with pytest.warns(cupti.CuptiWarning, match="not compiled in"):
        assert tracing.begin_step() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second step must not warn again
        assert tracing.begin_step() is False


@pytest.mark.skipif(_C.cupti_compiled(), reason="checks the stub of a build without CUPTI")
def test_stub_flush_reports_not_compiled():
    ok, message = _C.cupti_start(False)
    assert ok is False and "not compiled in" in message
    doc = json.loads(_C.cupti_flush())
    assert doc["ok"] is False and "not compiled in" in doc["message"]
    assert doc["ops"] == {} and doc["stats"]["kernels"] == 0
    assert _C.cupti_available() is False and _C.cupti_active() is False


# ----- on a GPU -----------------------------------------------------------------------

def _traced_step(body, record_nvtx: bool = False) -> cupti.StepKernels:
    tracing = cupti.KernelTracing(record_nvtx=record_nvtx)
    assert tracing.begin_step(), cupti.cupti_status()
    try:
        body()
        kernels = tracing.end_step()
    finally:
        tracing.close()
    assert kernels is not None
    return kernels


@needs_gpu
def test_kernels_map_to_the_innermost_op_and_others_are_counted():
    a = torch.randn(512, 512, device="cuda")
    torch.cuda.synchronize()

    def body():
        with _C._OpScope(1, "aten::mm"):
            torch.mm(a, a)
        with _C._OpScope(2, "aten::linear"):
            with _C._OpScope(3, "aten::relu"):
                torch.relu(a)
        torch.neg(a)  # outside any op
        worker = threading.Thread(target=lambda: torch.sin(a))  # another thread, no op
        worker.start()
        worker.join()

    kernels = _traced_step(body)
    assert kernels.ok, kernels.message
    assert set(kernels.ops) == {1, 3}
    for launches in kernels.ops.values():
        for k in launches:
            assert k["name"] and k["duration_us"] > 0
            assert min(k["grid"]) >= 1 and k["block"][0] >= 1
    assert kernels.stats["unattributed"] >= 2
    assert kernels.stats["dropped"] == 0 and kernels.stats["incomplete"] == 0


@needs_gpu
def test_tracing_steps_aside_for_torch_profiler_and_resumes():
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(256, 256, device="cuda")
    tracing = cupti.KernelTracing()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with pytest.warns(cupti.CuptiWarning, match="torch.profiler"):
            assert tracing.begin_step() is False
        torch.mm(a, a)
        torch.cuda.synchronize()
    assert tracing.end_step() is None
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert names, "the profiler must still see CUDA kernels"

    assert tracing.begin_step(), cupti.cupti_status()  # the profiler is gone: trace again
    with _C._OpScope(5, "aten::mm"):
        torch.mm(a, a)
    kernels = tracing.end_step()
    tracing.close()
    assert kernels is not None and 5 in kernels.ops


def test_no_buffer_is_left_with_cupti_between_steps():
    """After a traced step (or none) every buffer Habitat lent to CUPTI is back, and none of
    another client's reached it (on a GPU: through torch.profiler taking turns)."""
    foreign_before = _C.cupti_buffers()[1]
    tracing = cupti.KernelTracing()
    for _ in range(2):
        if tracing.begin_step():
            torch.mm(torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda"))
        tracing.end_step()
        assert _C.cupti_buffers()[0] == 0
        if torch.cuda.is_available():
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
                torch.mm(torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda"))
                torch.cuda.synchronize()
    tracing.close()
    assert _C.cupti_buffers() == (0, foreign_before)


@needs_gpu
def test_origin_device_is_matched_to_the_database():
    from habitat.data.devices import get_device

    name = cupti.origin_device()
    assert get_device(name).name == name  # a canonical database name


def _libcupti_path() -> str | None:
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            if "libcupti" in line:
                return line.split()[-1]
    return None


@needs_gpu
def test_nvtx_ranges_are_emitted_per_op():
    """NVTX ranges reach an NVTX tool: here CUPTI itself, injected as Nsight Systems would be."""
    assert cupti.KernelTracing().begin_step()  # loads libcupti into this process
    cupti.KernelTracing().close()
    library = _libcupti_path()
    if library is None:
        pytest.skip("libcupti is not loaded in this process")
    script = textwrap.dedent("""
        import json, torch
        from habitat import _C
        from habitat.capture import cupti
        a = torch.randn(256, 256, device="cuda")
        t = cupti.KernelTracing(record_nvtx=True)
        assert t.begin_step(), cupti.cupti_status()
        with _C._OpScope(1, "aten::mm", "encoder.fc"):
            torch.mm(a, a)
        with _C._OpScope(2, "aten::relu"):
            torch.relu(a)
        k = t.end_step()
        t.close()
        print(json.dumps({"nvtx": _C.nvtx_enabled(), "ranges": k.nvtx_ranges,
                          "sample": k.nvtx_sample}))
    """)
    env = subprocess_env(NVTX_INJECTION64_PATH=library, HABITAT_NVTX="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["nvtx"] is True
    assert result["ranges"] >= 2
    assert "aten::mm (encoder.fc)" in result["sample"] and "aten::relu" in result["sample"]


# Ops that only allocate or read a scalar back: no kernel to expect.
_ALLOCATION_ONLY = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::resize_",
                    "aten::set_", "aten::_local_scalar_dense"}


def _devices(op: dict) -> set[str]:
    metas = list(op.get("outputs", [])) + [meta for _, meta in tensor_args(op)]
    return {str(m.get("device", "cpu")).split(":")[0] for m in metas}


def _expects_kernels(op, raw: dict) -> bool:
    devices = _devices(raw)
    # A host<->device copy is a memcpy, not a kernel.
    return ("cuda" in devices and "cpu" not in devices and op.op_class != "no_kernel"
            and op.name not in _ALLOCATION_ONLY)


@needs_gpu
@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16"])
def test_every_op_of_a_training_step_has_kernels(autocast):
    """Done criterion: under predict_on on a GPU, every leaf op that does device work has
    the kernels it launched attached, and the forecast is runtime-based."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.LayerNorm(512), torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    predictor = habitat.predict_on(["A100", "H100"])
    for _ in range(2):  # the second step runs warm (no lazy init inside it)
        with predictor as forecast:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    step = forecast.latest
    by_id = {op["id"]: op for op in step.trace["ops"]}
    missing = []
    for op in step.leaf_ops():
        raw = by_id[op.id]
        if _expects_kernels(op, raw) and not raw.get("kernels"):
            missing.append(op.full_name)
    assert not missing, f"ops without kernels: {sorted(set(missing))}"
    methods = step.method_ops[forecast.targets[0]]
    assert methods.get("wave_scaling", 0) + methods.get("learned_ratio", 0) \
        + methods.get("roofline_ratio", 0) > 0, methods


# ----- recorded GPU traces as CPU fixtures ----------------------------------------------

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
RECORDED = sorted(RESULTS.glob("*/traces/*.json.gz"))
RUNTIME_METHODS = {"wave_scaling", "learned_ratio", "roofline_ratio"}


def _load_recorded(path: Path) -> dict:
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.skipif(not RECORDED, reason="no recorded GPU traces yet (bash benchmarks/gpu/run.sh)")
@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_recorded_gpu_trace_reforecasts(path: Path):
    """A step traced on a real GPU re-forecasts on CPU: its kernels are there, forecasting it
    onto its own GPU gives back exactly the measured kernel times, and every target gets a
    finite, positive time."""
    from habitat.data.devices import devices
    from habitat.data.forecast import Forecast

    doc = _load_recorded(path)
    origin = doc["origin"]["device"]
    targets = [origin] + [d.name for d in devices() if d.name != origin]
    step = Forecast.from_trace(doc, targets).latest
    ops = {op["id"]: op for op in step.trace["ops"]}

    assert sum(len(op.get("kernels", [])) for op in ops.values()) > 0
    runtime_ops = 0
    for op in step.leaf_ops():
        if op.method(origin) not in RUNTIME_METHODS:
            continue
        runtime_ops += 1
        measured = sum(k.get("duration_us", 0.0) for k in ops[op.id]["kernels"])
        assert op.time_us(origin) == pytest.approx(measured, rel=1e-6, abs=1e-9), op.full_name
    assert runtime_ops > 0
    for target in step.targets:
        assert 0 < step.total_ms[target] < float("inf"), target
