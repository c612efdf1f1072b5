"""What `import habitat` does with no torch, an unsupported torch, or a torch the capture plugin
was not built for: the engine and the analysis always import; capture fails with one clear
ImportError (never a crash) naming the fix."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import habitat

PYTHON_DIR = str(Path(habitat.__file__).resolve().parent.parent)
GOLDEN = Path(__file__).resolve().parent / "fixtures" / "golden_trace.json"
REBUILD = "pip install --no-build-isolation ."


def _run(script: str, fake_torch_version: str | None, tmp_path: Path) -> subprocess.CompletedProcess:
    """Runs `script` with habitat on the path; with a fake torch package of that version first
    on the path (it has none of torch's libraries, so habitat._C cannot load against it)."""
    path = [PYTHON_DIR]
    if fake_torch_version is not None:
        fake = tmp_path / "fake" / "torch"
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text(f"__version__ = {fake_torch_version!r}\n")
        path.insert(0, str(fake.parent))
    code = f"import sys; sys.path[:0] = {path!r}\n" + textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("running, ok", [("2.3.1", False), ("1.13.0", False), ("2.4.0", True),
                                         ("2.13.0+cpu", True), ("2.15.0", True)])
def test_torch_version_check(running, ok):
    problem = habitat._torch_problem(running)
    if ok:
        assert problem is None
    else:
        assert f"supports torch 2.4 to 2.15; this is torch {running}" in problem
        assert REBUILD in problem


def test_without_torch_the_engine_works_and_capture_says_what_it_needs(tmp_path):
    out = _run(f"""
        sys.modules["torch"] = None  # `import torch` raises ImportError, as where it is absent
        import habitat
        assert not habitat.TORCH_AVAILABLE and "habitat._C" not in sys.modules
        f = habitat.Forecast.load({str(GOLDEN)!r})
        print(round(f.time_ms("A100"), 9), round(f.compare(["A100"])["A100"].iteration_ms, 9))
        try:
            habitat.predict_on("A100")
        except ImportError as e:
            print(e)
        """, None, tmp_path)
    assert out.returncode == 0, out.stderr
    times, message = out.stdout.strip().splitlines()
    a, b = times.split()
    assert a == b and float(a) > 0
    assert message == ("habitat.predict_on needs PyTorch: pip install torch, then reinstall "
                       f"habitat with {REBUILD}")


def test_torch_is_loaded_before_the_engine(tmp_path):
    # Where GCC links libstdc++ statically into our extensions, the engine must not be the
    # module that creates pybind11's internals shared with torch: torch's own exceptions then
    # went through our copy of libstdc++ and crashed (H100 machine, 2026-11-23).
    out = _run("""
        import habitat, torch
        names = list(sys.modules)
        print(names.index("torch") < names.index("habitat._engine"))
        try:
            torch.ops.aten.no_such_op
        except AttributeError:
            print("translated")
        """, None, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "translated"]


def test_an_old_torch_is_refused_before_the_plugin_loads(tmp_path):
    out = _run("""
        try:
            import habitat
        except ImportError as e:
            print("habitat._C" in sys.modules, e)
        """, "2.3.0", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("False habitat supports torch 2.4 to 2.15; this is torch 2.3.0")


def test_a_plugin_built_for_another_torch_is_one_clear_error(tmp_path):
    # The plugin's import fails as it does for a build against another torch (an undefined
    # symbol) or a dispatch key check: here by blocking it.
    out = _run("""
        import torch
        sys.modules["habitat._C"] = None
        try:
            import habitat
        except ImportError as e:
            print(torch.__version__, "|", e)
        """, None, tmp_path)
    assert out.returncode == 0, out.stderr
    running, message = out.stdout.strip().split(" | ", 1)
    assert message.startswith("habitat's capture plugin (habitat._C) cannot be loaded: habitat was ")
    assert f"this is torch {running}" in message and REBUILD in message
