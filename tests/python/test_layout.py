"""The Python package's import graph: no cycle, and each layer imports only the layers below.

Layers (see python/habitat/__init__.py)::

    data      (trace, forecast, devices, engine)  imports nothing of habitat but _engine (and
                                                  the root's views, ROOT_VIEWS)
    analysis  (compare, memory, pricing, regions) imports data
    present   (text, report, tensorboard, ...)    imports data and analysis
    capture   (predict_on, cupti, compile, ...)   imports data; present only for its sinks
    learned   (features, model, fitting, ...)     imports data and analysis (trains the models
                                                  the engine serves; torch only to fit them)
    evaluate  (python -m habitat.evaluate)        imports data, analysis and learned
    cli, demo, __init__, __main__                 may import anything

The graph is read from every module's AST, so imports inside functions count (a function-local
import is still a dependency, it only runs later). Imports under ``if TYPE_CHECKING:`` are
left out: they never run, and annotations naming a higher layer's type do not make a module
depend on it at run time; a cycle through them cannot fail an import.
data/, analysis/ and present/ never import torch, so that saved traces are analysed and
presented without it (.ci/no_torch.sh checks that in a venv without torch); neither do
evaluate/ and learned/, but for the fitting of the models.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "habitat"
LAYERS = {"data", "capture", "analysis", "present", "learned", "evaluate"}
#: What each layer may import from habitat (besides itself and the extension modules).
ALLOWED = {
    "data": {"habitat._engine", "habitat._version"},
    "analysis": {"habitat._engine", "habitat._version", "data"},
    "present": {"habitat._engine", "habitat._version", "data", "analysis"},
    "capture": {"habitat._engine", "habitat._C", "habitat._version", "data",
                "habitat.present.tensorboard"},
    "learned": {"habitat._engine", "habitat._version", "data", "analysis"},
    "evaluate": {"habitat._engine", "habitat._version", "data", "analysis", "learned"},
}
#: Known exceptions, each with its reason and owner; remove an entry once its import is fixed.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("habitat.learned.traces", "habitat.evaluate.timeline"): "as_cpu_trace, the CPU view of a GPU "
                                                             "trace the models train on (lead, i30: "
                                                             "move it below learned/)",
}
#: Imports of the package root from a layer, by design: a function reaching a view of a higher
#: layer through it when called (the root has imported every layer by then), never at import time.
ROOT_VIEWS: dict[tuple[str, str], str] = {
    ("habitat.data.forecast", "habitat"): "Forecast.__str__, compare and on_clusters: the text "
                                          "view (present) and the GPU and cluster comparisons "
                                          "(analysis), named in habitat/__init__.py",
}
#: Torch imports allowed in the torch-free layers, each lazy and with its reason.
TORCH_EXCEPTIONS: dict[tuple[str, str], str] = {
    # The TensorBoard sink builds its histogram/text summaries with torch's summary helpers,
    # imported when the first step is logged; used only while capturing (with torch).
    ("habitat.present.tensorboard", "torch.utils.tensorboard"): "summary builders, lazily",
    # Fitting the learned models (python -m habitat.learned.train), never when serving them.
    ("habitat.learned.fitting", "torch"): "the MLPs' fit, lazily",
}
TORCH_FREE = ("data", "analysis", "present", "learned", "evaluate")
#: Modules of the capture layer that import no torch either (predict_on's logic, tested alone).
TORCH_FREE_CAPTURE = ("habitat.capture.schedule", "habitat.capture.clusters")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@functools.lru_cache(maxsize=None)
def _imports(path: Path) -> frozenset[str]:
    """Absolute names of the modules `path` imports, TYPE_CHECKING blocks left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from habitat import _engine` / `from habitat.capture import phase` import
            # submodules; the package itself counts only for a name defined in it
            # (`from habitat import __version__`)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if _exists(candidate) else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return frozenset(found)


def _exists(module: str) -> bool:
    parts = module.split(".")
    if parts[0] != "habitat":
        return False
    rel = Path(*parts[1:]) if len(parts) > 1 else Path()
    return ((PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()
            or module in ("habitat._engine", "habitat._C"))


@functools.lru_cache(maxsize=None)
def _graph() -> dict[str, frozenset[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        graph[name] = frozenset(i for i in _imports(path) if i == "habitat" or i.startswith("habitat."))
    return graph


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _permitted(module: str, imported: str) -> bool:
    layer = _layer(module)
    if layer is None or (module, imported) in KNOWN_EXCEPTIONS or (module, imported) in ROOT_VIEWS:
        return True
    if _layer(imported) == layer:
        return True
    allowed = ALLOWED[layer]
    if imported in allowed:
        return True
    target = _layer(imported)
    if target is not None and target in allowed:
        return True
    # `from habitat.data import x` records "habitat.data" too: a package of an allowed layer
    return imported == f"habitat.{target}" and target in allowed


def test_graph_covers_the_package():
    graph = _graph()
    assert "habitat.data.forecast" in graph and "habitat.capture.predict" in graph
    assert "habitat.data.forecast" in graph["habitat.analysis.compare"]


def test_no_import_cycle():
    graph = {m: {d for d in deps if d in _graph_modules()} for m, deps in _graph().items()}
    # Importing a submodule first imports its package: habitat.x.y depends on habitat.x.
    # The top package imports everything on purpose, so edges into "habitat" itself are the
    # known exceptions above, never part of a cycle we check.
    graph = {m: {d for d in deps if d != "habitat"} for m, deps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                dfs(dep)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            dfs(module)


def _graph_modules() -> set[str]:
    return set(_graph())


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layers_import_only_downward(layer):
    bad = sorted(f"{module} imports {imported}"
                 for module, deps in _graph().items() if _layer(module) == layer
                 for imported in deps if not _permitted(module, imported))
    assert not bad, "layer rule broken:\n" + "\n".join(bad)


@pytest.mark.parametrize("layer", TORCH_FREE)
def test_torch_free_layers(layer):
    bad = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for imported in _imports(path):
            if imported.split(".")[0] in ("torch", "habitat._C") or imported == "habitat._C":
                if (_module_name(path), imported) not in TORCH_EXCEPTIONS:
                    bad.append(f"{_module_name(path)} imports {imported}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module", TORCH_FREE_CAPTURE)
def test_torch_free_capture_modules(module):
    deps = _imports(PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py"))
    bad = sorted(i for i in deps if i.split(".")[0] == "torch" or i == "habitat._C"
                 or (i.startswith("habitat.") and _layer(i) not in (*TORCH_FREE, None)
                     and i not in TORCH_FREE_CAPTURE))
    assert not bad, f"{module} imports " + ", ".join(bad)


def test_known_exceptions_still_needed():
    graph = _graph()
    for (module, imported), reason in {**KNOWN_EXCEPTIONS, **ROOT_VIEWS}.items():
        assert imported in graph.get(module, set()), f"stale exception {module} -> {imported}: {reason}"
    for (module, imported), reason in TORCH_EXCEPTIONS.items():
        path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
        assert imported in _imports(path), f"stale exception {module} -> {imported}: {reason}"
