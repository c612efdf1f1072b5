"""torch.compile with Habitat: the ``habitat`` backend, on CPU with inductor (real compiles).

Compiling is slow on small machines, so the models are tiny and each compiled artifact is
built once per module (fixtures below) and reused by the tests.
"""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

from habitat import _C
from habitat.analysis.regions import compiled_regions
from habitat.capture.compile import FUSED_NAMESPACE, compiled_graphs
from habitat.capture.predict import HabitatWarning, predict_on

HAS_CAPTURE = hasattr(_C, "_CaptureSession")
needs_capture = pytest.mark.skipif(not HAS_CAPTURE,
                                   reason="habitat._C was built without the op capture")

STEPS = 3
TARGET = "A100"
#: A compiled step's forecast may not exceed the eager forecast of the same step by more than
#: this: fused kernels move a subset of the bytes the eager ops they replace move, GEMMs are the
#: same extern calls, and only extra copies inductor adds (layout changes) can cost more.
COMPILED_OVER_EAGER = 1.05


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.ReLU(),
                                 nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Block(nn.Module):
    """A pre-norm transformer block."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


def _dynamo_stats() -> tuple[int, int, int]:
    """(graphs compiled, recompiles, graph breaks) since the counters were cleared."""
    from torch._dynamo.utils import counters

    return (counters["stats"]["unique_graphs"], sum(counters["recompiles"].values()),
            sum(counters["graph_break"].values()))


def _train(model: nn.Module, inputs: list[torch.Tensor], backend: str | None,
           habitat_on: bool) -> dict:
    """Three SGD steps; returns losses, final parameters, step forecasts and dynamo counts."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = copy.deepcopy(model)
    step_model = torch.compile(model, backend=backend) if backend else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, steps = [], []
    predictor = predict_on(TARGET) if habitat_on else None
    graphs_before = len(compiled_graphs())
    frames = []
    for i, x in enumerate(inputs):
        # Steps after the first must reuse the first step's graphs: a recompile raises.
        with torch._dynamo.config.patch(error_on_recompile=i > 0), warnings.catch_warnings():
            warnings.simplefilter("error", HabitatWarning)
            ctx = predictor if predictor is not None else _Null()
            with ctx:
                loss = step_model(x).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        losses.append(loss.detach().clone())
        frames.append(_dynamo_stats())
        if predictor is not None:
            steps.append(predictor.forecast.latest)
    return {"losses": losses, "params": [p.detach().clone() for p in model.parameters()],
            "steps": steps, "frames": frames,
            "graphs": compiled_graphs()[graphs_before:]}


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def _inputs(shape: tuple[int, ...]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(shape, generator=g) for _ in range(STEPS)]


CASES = {"mlp": (Mlp, (8, 16)), "block": (Block, (2, 8, 32))}


@pytest.fixture(scope="module", params=sorted(CASES))
def runs(request: pytest.FixtureRequest) -> dict:
    cls, shape = CASES[request.param]
    torch.manual_seed(0)
    model = cls()
    inputs = _inputs(shape)
    runs = {
        "name": request.param,
        "inductor": _train(model, inputs, "inductor", habitat_on=False),
        "habitat": _train(model, inputs, "habitat", habitat_on=HAS_CAPTURE),
    }
    if HAS_CAPTURE:
        runs["inductor_in_predict_on"] = _train(model, inputs, "inductor", habitat_on=True)
        runs["eager"] = _train(model, inputs, None, habitat_on=True)
    return runs


def test_results_are_bitwise_identical(runs: dict) -> None:
    base = runs["inductor"]
    for key in ("habitat", "inductor_in_predict_on"):
        if key not in runs:
            continue
        for a, b in zip(base["losses"], runs[key]["losses"]):
            assert torch.equal(a, b), key
        for a, b in zip(base["params"], runs[key]["params"]):
            assert torch.equal(a, b), key


def test_no_recompiles_or_extra_graphs(runs: dict) -> None:
    base = runs["inductor"]["frames"]
    for key in ("habitat", "inductor_in_predict_on"):
        if key not in runs:
            continue
        frames = runs[key]["frames"]
        # Graphs are compiled in the first step only; later steps reuse them.
        assert frames[0] == frames[-1], (key, frames)
        assert frames[-1] == base[-1], (key, frames, base)
        assert frames[-1][1] == 0 and frames[-1][2] == 0, (key, frames)


def _fused_ops(step) -> list:
    return [op for op in step.ops if op.name.startswith(FUSED_NAMESPACE + "::")]


@needs_capture
def test_every_fused_kernel_is_forecast_each_step(runs: dict) -> None:
    graphs = runs["habitat"]["graphs"]
    kinds = {g.kind for g in graphs}
    assert {"forward", "backward"} <= kinds
    kernels = sorted(k.name for g in graphs for k in g.kernels)
    assert kernels, "inductor generated no kernels?"
    for step in runs["habitat"]["steps"]:
        fused = _fused_ops(step)
        assert sorted(op.name.split("::", 1)[1] for op in fused) == kernels
        for op in fused:
            pred = op.predictions[step.targets[0]]
            assert pred.time_us > 0 and pred.method != "fallback", op.full_name
            assert op.bytes > 0
        # Backward kernels are backward work; forward kernels carry their region's name.
        by_name = {k.name: g for g in graphs for k in g.kernels}
        for op in fused:
            g = by_name[op.name.split("::", 1)[1]]
            if g.kind == "backward":
                assert op.phase == "backward"
            else:
                assert op.module_path == g.region


@needs_capture
def test_extern_ops_are_captured_once(runs: dict) -> None:
    graphs = runs["habitat"]["graphs"]
    externs = sum(len(g.externs) for g in graphs)
    gemms = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
    for step in runs["habitat"]["steps"]:
        by_id = {op.id: op for op in step.ops}
        # A GEMM nested in a GEMM is one call seen twice (CPU addmm.out calls its own pieces).
        captured = [op for op in step.ops if op.name in gemms
                    and not (op.parent is not None and by_id[op.parent].name in gemms)]
        # Each extern GEMM inductor calls is one recorded aten op, never also a fused record.
        assert len(captured) == sum(1 for g in graphs for e in g.externs
                                    if e.name.rsplit(".", 1)[-1] in {"mm", "addmm", "bmm",
                                                                     "baddbmm"})
        assert externs >= len(captured) > 0


@needs_capture
def test_compile_time_ops_are_not_step_work(runs: dict) -> None:
    # The first step compiles inside predict_on; its records must match a compiled-only step.
    # Calls are compared, not their CPU-internal pieces: AOTAutograd runs a compiled graph's
    # first call under a TorchDispatchMode (_AnalyzeCustomOpInputOutputMode), and below a
    # Python mode torch excludes every key above Python, so the pieces a CPU kernel
    # dispatches itself (addmm.out's expand/copy_) are not seen that once.
    steps = runs["habitat"]["steps"]
    first = sorted(op.full_name for op in steps[0].ops if op.parent is None)
    later = sorted(op.full_name for op in steps[1].ops if op.parent is None)
    assert first == later
    assert len(steps[1].ops) == len(steps[2].ops)


@needs_capture
def test_compiled_total_close_to_eager(runs: dict) -> None:
    compiled = runs["habitat"]["steps"][-1].total_ms[runs["habitat"]["steps"][-1].targets[0]]
    eager = runs["eager"]["steps"][-1].total_ms[runs["eager"]["steps"][-1].targets[0]]
    print(f"{runs['name']}: compiled {compiled * 1e3:.2f} us, eager {eager * 1e3:.2f} us, "
          f"ratio {compiled / eager:.3f}")
    assert 0 < compiled <= eager * COMPILED_OVER_EAGER


def test_graphs_record_nodes_shapes_and_sources(runs: dict) -> None:
    for g in runs["habitat"]["graphs"]:
        assert g.nodes and all(n.op for n in g.nodes)
        names = {n.name for n in g.nodes}
        for k in g.kernels:
            assert k.kind != "unknown", k.name
            assert set(k.source_nodes) <= names
            assert k.source_ops and k.writes
            # Fusion keeps intermediates in registers: never more traffic than the eager ops.
            assert 0 < k.bytes <= k.eager_bytes, k


def test_backend_is_registered_by_import() -> None:
    from torch._dynamo.backends.registry import lookup_backend

    from habitat.capture.compile import habitat_backend

    assert lookup_backend("habitat") is habitat_backend


@needs_capture
def test_reports_show_compiled_regions(runs: dict) -> None:
    from habitat.analysis.regions import compiled_regions, format_regions

    graphs = {g.graph_id: g for g in runs["habitat"]["graphs"]}
    step = runs["habitat"]["steps"][-1]
    target = step.targets[0]
    regions = compiled_regions(step, target)
    assert {r.graph_id for r in regions} == set(graphs)
    for r in regions:
        g = graphs[r.graph_id]
        assert r.name == g.region and r.phase == g.kind
        assert sorted(k.name for k in r.kernels) == sorted(k.name for k in g.kernels)
        assert all(k.sources and k.kind for k in r.kernels)
        assert r.time_us == pytest.approx(sum(k.time_us for k in r.kernels)
                                          + sum(us for _, us in r.extern_ops))
    # Every extern GEMM of the backward graph is attributed to its region too.
    backward = [r for r in regions if r.phase == "backward"]
    assert backward and any(op.startswith("aten::mm") for r in backward for op, _ in r.extern_ops)
    text = "\n".join(format_regions(step, target))
    assert "Compiled regions on" in text
    assert all(g.region in text for g in graphs.values())


@needs_capture
def test_compiled_modules_do_not_warn_about_habitats_module_hooks() -> None:
    model = torch.compile(nn.Linear(4, 4), backend="eager")
    with predict_on(TARGET):  # installs Habitat's global module hooks (they stay, idle)
        model(torch.randn(2, 4))
    with warnings.catch_warnings(record=True) as caught:  # the filters in force, as a user's
        model(torch.randn(2, 4))
    assert not [w for w in caught if "global hooks" in str(w.message)]


def _train_compiled_step(habitat_on: bool) -> dict:
    """A whole training step (forward, backward, optimizer) under torch.compile."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = Mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile(backend="habitat")
    def train_step(x: torch.Tensor) -> torch.Tensor:
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    predictor = predict_on(TARGET)
    losses, frames = [], []
    for i, x in enumerate(_inputs((8, 16))):
        with torch._dynamo.config.patch(error_on_recompile=i > 0), warnings.catch_warnings():
            warnings.simplefilter("error", HabitatWarning)
            with predictor if habitat_on else _Null():
                losses.append(train_step(x).detach().clone())
        frames.append(_dynamo_stats())
    return {"losses": losses, "params": [p.detach().clone() for p in model.parameters()],
            "frames": frames, "forecast": predictor.forecast}


@needs_capture
def test_a_compiled_training_step_is_unchanged_and_forecast() -> None:
    plain, ours = _train_compiled_step(False), _train_compiled_step(True)
    assert all(torch.equal(a, b) for a, b in zip(plain["losses"], ours["losses"]))
    assert all(torch.equal(a, b) for a, b in zip(plain["params"], ours["params"]))
    # Same graphs and graph breaks (loss.backward() breaks the graph either way), no recompile.
    assert ours["frames"] == plain["frames"]
    assert ours["frames"][0] == ours["frames"][-1] and ours["frames"][-1][1] == 0
    forecast = ours["forecast"]
    assert len(forecast.steps) == STEPS
    step = forecast.latest
    assert _fused_ops(step) and step.total_ms[step.targets[0]] > 0
    assert {op.phase for op in _fused_ops(step)} == {"forward", "backward", "optimizer"}
    regions = compiled_regions(step, step.targets[0])
    assert "optimizer" in {r.phase for r in regions}


@needs_capture
def test_the_report_lists_compiled_regions(runs: dict, tmp_path) -> None:
    from habitat.data.forecast import Forecast
    from habitat.present.escape import markdown_text
    from habitat.present.report import write_report

    step = runs["habitat"]["steps"][-1]
    forecast = Forecast(step.targets)
    forecast.add_step(step.trace)  # re-forecast the captured step, as a saved trace would be
    path = write_report(forecast, tmp_path / "report.md")
    text = path.read_text()
    assert "Compiled regions (torch.compile)" in text
    # Names are escaped as Markdown text (present/escape.py): compiled\_region...
    assert all(markdown_text(g.region, starts_line=False) in text for g in runs["habitat"]["graphs"])
