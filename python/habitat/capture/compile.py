"""The ``habitat`` torch.compile backend: inductor, plus forecasts of the kernels it generates.

    model = torch.compile(model, backend="habitat")    # inductor underneath
    with habitat.predict_on("A100") as forecast:
        loss = model(x).sum(); loss.backward(); opt.step()

Each graph inductor compiles (forward, backward, inference) is recorded with its aten nodes,
shapes and dtypes, and each kernel inductor generated is mapped to the aten nodes it fuses
(inductor's kernel provenance). When a compiled graph runs inside ``predict_on``, every generated
kernel it launches is recorded in the step as an op ``habitat_fused::<kernel>`` carrying the
buffers it reads and writes and the FLOPs of its aten nodes (csrc/src/cost/fused_cost.h costs it); the
aten kernels inductor calls itself (mm, addmm, bmm, convolution, fallbacks) go through the
dispatcher and are captured as usual, so nothing is counted twice. Results are inductor's own:
Habitat only reads the compiled artifacts and wraps the compiled callable.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import itertools
import sys
import threading
import warnings
from types import ModuleType
from typing import Any, Callable, Iterator, Sequence

import torch

from habitat import _C
from habitat.capture import modules as _modules
from habitat.capture.inductor_map import CompiledGraph, map_graph

BACKEND_NAME = "habitat"
FUSED_NAMESPACE = "habitat_fused"
_FUSED_SCHEMA = "(int graph, str kind, str sources, float flops, str reads, str writes) -> ()"

_lock = threading.Lock()
_graph_ids = itertools.count()
_graphs: dict[int, CompiledGraph] = {}
_library: torch.library.Library | None = None
_defined: set[str] = set()


def compiled_graphs() -> list[CompiledGraph]:
    """Every graph the habitat backend compiled in this process, in compile order."""
    with _lock:
        return [_graphs[i] for i in sorted(_graphs)]


def compiled_graph(graph_id: int) -> CompiledGraph:
    with _lock:
        return _graphs[graph_id]


# ----- recording at run time -----------------------------------------------------------------
def _noop(*args: Any) -> None:
    return None


def _fused_op(kernel: str) -> Any:
    """The op a launch of `kernel` is recorded as (defined once per kernel name)."""
    global _library
    with _lock:
        if kernel not in _defined:
            if _library is None:
                _library = torch.library.Library(FUSED_NAMESPACE, "FRAGMENT")
            _library.define(kernel + _FUSED_SCHEMA)
            # No tensors: the call reaches Habitat's capture key, then this no-op.
            _library.impl(kernel, _noop, "CompositeExplicitAutograd")
            _defined.add(kernel)
    return getattr(getattr(torch.ops, FUSED_NAMESPACE), kernel).default


_GRAPH_OP_NAMESPACE = "habitat"
_GRAPH_OP = "compiled_graph"  # csrc/include/habitat/compiled_kernels.h: kCompiledGraphOp
_graph_library: torch.library.Library | None = None


def _graph_op() -> Any:
    """The record of one run of a compiled graph, habitat::compiled_graph(int graph) -> ().

    The graph itself runs right after it, outside the dispatcher (a dispatch mode, such as
    AOTAutograd's on a graph's first call, would hide the ops inside an op from the capture),
    with CUDA kernels attributed to this record (csrc/include/habitat/compiled_kernels.h)."""
    global _graph_library
    with _lock:
        if _graph_library is None:
            _graph_library = torch.library.Library(_GRAPH_OP_NAMESPACE, "FRAGMENT")
            _graph_library.define(_GRAPH_OP + "(int graph) -> ()")
            _graph_library.impl(_GRAPH_OP, _noop, "CompositeExplicitAutograd")
    return getattr(getattr(torch.ops, _GRAPH_OP_NAMESPACE), _GRAPH_OP).default


def _recording() -> bool:
    active = getattr(_C, "_capture_active", None)
    # Without the capture's cheap check every run records; the capture drops the records
    # when no predict_on step is open, so this costs time, never correctness.
    return True if active is None else bool(active())


def _launches(graph: CompiledGraph) -> list[tuple[Any, tuple[Any, ...]]]:
    return [(_fused_op(k.name),
             (graph.graph_id, k.kind, ";".join(k.source_ops), float(k.flops),
              ";".join(b.spec() for b in k.reads), ";".join(b.spec() for b in k.writes)))
            for k in graph.kernels]


def _wrap_callable(run: Callable[[list[Any]], Any], graph: CompiledGraph) -> Callable[[list[Any]], Any]:
    launches = _launches(graph)
    region = graph.region
    enter = getattr(_C, "_capture_enter_module", None)
    leave = getattr(_C, "_capture_exit_module", None)
    if enter is None or leave is None:  # a build without op capture: nothing to record into
        return run
    # Optimizer hooks do not fire inside a compiled optimizer.step(): say so for its graph.
    optimizer = graph.kind == "optimizer"
    graph_op = _graph_op()

    def run_recorded(args: list[Any]) -> Any:
        if not _recording():
            return run(args)
        # Ops inside the region (extern kernels and the fused records) carry its name.
        enter(region)
        if optimizer:
            _C._capture_enter_optimizer()
        try:
            for op, op_args in launches:
                op(*op_args)
            graph_op(graph.graph_id)
            # Generated kernels launch outside any aten op: they belong to the graph's record.
            attributed = _C._capture_attribute_kernels_to_last_op()
            try:
                return run(args)
            finally:
                if attributed:
                    _C._capture_end_kernel_attribution()
        finally:
            if optimizer:
                _C._capture_exit_optimizer()
            leave()

    return run_recorded


# ----- compiling -----------------------------------------------------------------------------
@contextlib.contextmanager
def _capture_suspended() -> Iterator[None]:
    """No op run while compiling (fake tensors, autotuning) is work of the step."""
    suspend = getattr(_C, "_capture_suspend", None)
    resume = getattr(_C, "_capture_resume", None)
    if suspend is None or resume is None:
        yield
        return
    suspend()
    try:
        yield
    finally:
        resume()


def _on_compile_start(args: Any) -> None:
    _modules.note_compiled()  # code compiled now guards on Habitat's hooks if installed
    # Dynamo guards on the thread's dispatch keys. predict_on takes the capture key off the
    # thread between and during timed steps until it sees compiled code, then leaves it on
    # (dynamo restores the thread's keys after compiling; predict_on includes it again at its
    # next step): code compiled with the key off would recompile once it is back on.
    if not _C._capture_key_included() and _modules.predicting_here():
        _C._capture_include_key()
    suspend = getattr(_C, "_capture_suspend", None)
    if suspend is not None:
        suspend()


def _on_compile_end(args: Any) -> None:
    resume = getattr(_C, "_capture_resume", None)
    if resume is not None:
        resume()


def install_compile_callbacks() -> None:
    """Suspends op capture while dynamo compiles a frame or AOTAutograd compiles a lazy
    backward, whatever the backend. Idempotent and cheap; torch._dynamo.reset() removes the
    callbacks, so predict_on calls this at each step. Does nothing before dynamo is loaded."""
    dynamo_callback = sys.modules.get("torch._dynamo.callback")
    if dynamo_callback is None:
        return
    handler = dynamo_callback.callback_handler
    with _lock:
        if _on_compile_start not in handler.start_callbacks:
            handler.register_start_callback(_on_compile_start)
            handler.register_end_callback(_on_compile_end)


def _graph_kind(kwargs: dict[str, Any], optimizer: bool) -> str:
    if kwargs.get("is_backward"):
        return "backward"
    if optimizer:
        return "optimizer"
    return "inference" if kwargs.get("is_inference") else "forward"


_OPTIMIZER_SOURCE = "/torch/optim/"


def _runs_optimizer(gm: torch.fx.GraphModule) -> bool:
    """Whether dynamo's graph is (part of) an optimizer step: every op it traced was called
    from torch.optim's code (node stack traces name the source lines)."""
    traces = [n.meta.get("stack_trace") or "" for n in gm.graph.nodes
              if n.op in ("call_function", "call_method", "call_module")]
    return bool(traces) and all(_OPTIMIZER_SOURCE in t.replace("\\", "/") for t in traces)


def _inner_compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                   optimizer: bool = False, **kwargs: Any) -> Any:
    from torch._inductor import config as inductor_config
    from torch._inductor import debug as inductor_debug
    from torch._inductor.compile_fx import compile_fx_inner

    # Provenance is only collected while inductor generates code: a cache hit would skip it.
    patches = {"fx_graph_cache": False, "trace.provenance_tracking_level": 1}
    with _capture_suspended(), inductor_config.patch(patches), \
            inductor_debug.reset_provenance_globals():
        compiled = compile_fx_inner(gm, example_inputs, **kwargs)
        provenance = {key: list(nodes) for key, nodes in
                      inductor_debug._inductor_triton_kernel_to_post_grad_node_info.items()}
    source = getattr(compiled, "source_code", None)
    run = getattr(compiled, "current_callable", None)
    if source is None or run is None:
        warnings.warn(f"habitat: inductor returned {type(compiled).__name__}, which Habitat cannot "
                      "read; its kernels are missing from forecasts (the model runs normally)",
                      stacklevel=2)
        return compiled
    try:
        with _lock:
            graph_id = next(_graph_ids)
        graph = map_graph(graph_id, _graph_kind(kwargs, optimizer), gm, source, provenance)
        wrapped = _wrap_callable(run, graph)
    except Exception as e:  # never fail the user's compile over a forecast
        warnings.warn(f"habitat: could not map inductor's kernels ({type(e).__name__}: {e}); "
                      "this graph's fused kernels are missing from forecasts", stacklevel=2)
        return compiled
    with _lock:
        _graphs[graph_id] = graph
    compiled.current_callable = wrapped
    return compiled


def habitat_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                    **kwargs: Any) -> Any:
    """``torch.compile(m, backend="habitat")``: inductor, with its graphs and kernels recorded.

    Keyword options are inductor config patches, as with ``options=`` for inductor."""
    from torch._functorch import config as functorch_config
    from torch._inductor.compile_fx import compile_fx

    options = kwargs.get("options") or None
    install_compile_callbacks()
    # Dynamo's tensor guards include the thread's dispatch keys: compiling with the capture key
    # already included keeps the first predict_on step from forcing a recompile.
    include_key = getattr(_C, "_capture_include_key", None)
    if include_key is not None:
        include_key()
    # A cached AOTAutograd result would skip inductor altogether, and with it the kernel map.
    inner_compile = functools.partial(_inner_compile, optimizer=_runs_optimizer(gm))
    with _capture_suspended(), functorch_config.patch(enable_autograd_cache=False):
        return compile_fx(gm, example_inputs, inner_compile=inner_compile,
                          config_patches=options)


# ----- registration --------------------------------------------------------------------------
def register() -> None:
    """Registers the backend name with dynamo (imports torch._dynamo)."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if BACKEND_NAME not in _COMPILER_FNS:
        register_backend(habitat_backend, name=BACKEND_NAME)
    install_compile_callbacks()


class _RegisterWhenDynamoLoads(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Registers the backend as soon as dynamo's registry is imported, so ``import habitat``
    does not pay for importing torch._dynamo (seconds) when nothing is compiled."""

    target = "torch._dynamo.backends.registry"

    def __init__(self) -> None:
        self._inner: importlib.abc.Loader | None = None

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.target:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._inner.create_module(spec) if self._inner is not None else None

    def exec_module(self, module: ModuleType) -> None:
        assert self._inner is not None
        self._inner.exec_module(module)
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        module.register_backend(habitat_backend, name=BACKEND_NAME)
        install_compile_callbacks()


def _register_lazily() -> None:
    if _RegisterWhenDynamoLoads.target in sys.modules:
        register()
    elif not any(isinstance(f, _RegisterWhenDynamoLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterWhenDynamoLoads())


_register_lazily()
