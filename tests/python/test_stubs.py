"""The type stubs of the extension modules (python/habitat/_engine.pyi, _C.pyi) name what the
built modules hold: every function, class and constant, and every class's methods and properties.
mypy (.ci/run) checks the torch-free layers against these stubs, so a binding added, renamed or
removed without its stub would be checked against an API that no longer exists."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "habitat"


def stub_names(path: Path) -> dict[str, set[str]]:
    """{"": module-level names, class name: its members} as the stub declares them."""
    names: dict[str, set[str]] = {"": set()}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[""].add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[""].add(node.target.id)
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return names


def module_names(module: object) -> dict[str, set[str]]:
    """The same, read from the built module (dunder names left out, as the stub generator does,
    but for the ones a stub declares)."""
    def public(own: dict[str, object]) -> set[str]:
        return {n for n in own if not (n.startswith("__") and n.endswith("__"))}

    names: dict[str, set[str]] = {"": public(vars(module))}
    for name in names[""]:
        obj = getattr(module, name)
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            names[name] = public(vars(obj))
    return names


@pytest.mark.parametrize("name", ["_engine", "_C"])
def test_stub_names_the_built_module(name: str) -> None:
    module = importlib.import_module(f"habitat.{name}")
    stub = stub_names(PACKAGE / f"{name}.pyi")
    built = module_names(module)
    dunders = {k: {n for n in v if n.startswith("__")} for k, v in stub.items()}
    stub = {k: v - dunders[k] for k, v in stub.items()}
    for scope in sorted(set(stub) | set(built)):
        if scope and (scope not in stub or scope not in built):
            continue  # a class missing on one side is reported at module level
        where = f"habitat.{name}" + (f".{scope}" if scope else "")
        assert built.get(scope, set()) == stub.get(scope, set()), (
            f"{where}: in the module only {sorted(built[scope] - stub[scope])}, in "
            f"python/habitat/{name}.pyi only {sorted(stub[scope] - built[scope])}; regenerate the "
            f"stub (stubgen --include-private -m habitat.{name}) and keep its hand-typed returns")
    for cls, members in dunders.items():
        if cls:
            missing = [m for m in members if m != "__init__" and not hasattr(getattr(module, cls), m)]
            assert not missing, f"habitat.{name}.{cls}: the stub declares {missing}, the class lacks them"
