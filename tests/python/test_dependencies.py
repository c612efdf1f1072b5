"""pyproject.toml declares what the package imports: every third-party module that
python/habitat imports is a dependency or in an extra (or below, with the reason it is not),
and one imported when its module loads is a dependency, so that `import habitat` never
needs an extra. The modules are read from the source (AST), imports inside functions included.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "habitat"
#: Imported, not declared, each with its reason.
UNDECLARED = {
    "torch": "the user picks the build (CPU, or CUDA for their driver); habitat works without it "
             "on saved traces; run.sh installs one",
    "tqdm": "progress bars when installed, a plain one otherwise (present/progress.py)",
}
#: Where the import name differs from the distribution's.
DISTRIBUTION = {"sklearn": "scikit-learn", "yaml": "pyyaml"}

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib, sys.stdlib_module_names")


def _requirements_module():
    spec = importlib.util.spec_from_file_location("habitat_requirements", ROOT / "cmake" / "requirements.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _declared() -> tuple[set[str], set[str]]:
    """Distribution names of the dependencies, and of everything the extras add."""
    import tomllib

    requirements = _requirements_module()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    names = lambda reqs: {requirements.canonicalize_name(r.name) for r in reqs}  # noqa: E731
    run = names(requirements.declared(project, "run"))
    extras = set()
    for extra in project["project"]["optional-dependencies"]:
        extras |= names(requirements.declared(project, extra))
    return run, extras


def _third_party(name: str | None) -> str | None:
    top = (name or "").split(".")[0]
    if not top or top == "habitat" or top in sys.stdlib_module_names:
        return None
    return DISTRIBUTION.get(top, top).lower().replace("_", "-")


def _imports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """{distribution: modules} imported anywhere, and imported unguarded when a module loads."""
    anywhere: dict[str, set[str]] = {}
    at_load: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for dist in filter(None, map(_third_party, names)):
                anywhere.setdefault(dist, set()).add(rel)
                if id(node) in top_level:
                    at_load.setdefault(dist, set()).add(rel)
    return anywhere, at_load


def test_the_reader_finds_the_known_imports():
    anywhere, at_load = _imports()
    assert {"numpy", "torch", "matplotlib", "tensorboard"} <= set(anywhere)
    assert "python/habitat/learned/model.py" in at_load["numpy"]


def test_every_import_is_declared():
    run, extras = _declared()
    anywhere, _ = _imports()
    missing = {dist: sorted(where)[:3] for dist, where in anywhere.items()
               if dist not in run | extras and dist not in UNDECLARED}
    assert not missing, f"imported but not in pyproject.toml's dependencies or extras: {missing}"


def test_imports_at_load_are_dependencies():
    run, _ = _declared()
    _, at_load = _imports()
    optional = {dist: sorted(where)[:3] for dist, where in at_load.items()
                if dist not in run and dist != "torch"}
    assert not optional, ("imported when the module loads, so `import habitat` needs it: declare it "
                          f"in dependencies or import it where it is used: {optional}")


def test_nothing_declared_is_unused():
    run, extras = _declared()
    anywhere, _ = _imports()
    tools = {"pytest", "hypothesis", "safetensors",  # the tests' (safetensors: a reference to test against)
             "ruff", "mypy", "scikit-build-core", "pybind11"}  # and the build's
    unused = (run | extras) - set(anywhere) - tools
    assert not unused, f"declared in pyproject.toml, imported nowhere in python/habitat: {sorted(unused)}"


def test_requirements_expands_extras_and_reads_what_is_installed():
    import tomllib

    requirements = _requirements_module()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    dev = {str(req) for req in requirements.declared(project, "dev")}
    # dev names habitat[test,tensorboard,plot]: their requirements, not the project itself.
    assert {"pytest>=7", "tensorboard", "matplotlib", "ruff"} <= dev
    assert not any(req.startswith("habitat") for req in dev)

    Requirement = requirements.Requirement
    assert requirements.satisfied(Requirement("numpy"))
    assert not requirements.satisfied(Requirement("numpy<0.1"))
    assert not requirements.satisfied(Requirement("habitat-no-such-distribution"))
    # A marker that does not apply here needs nothing.
    assert requirements.satisfied(Requirement('habitat-no-such-distribution; python_version < "3"'))


def test_requirements_names_an_unknown_group():
    with pytest.raises(SystemExit, match="no group 'plots'.*known: build, run, tensorboard, plot"):
        _requirements_module().main(["plots"])
