"""Every repository path that the docs, docstrings and comments name exists.

A path is a token with a slash whose first part names a folder or file of the repository (so
`fp32/bf16` or `runs/step.json` are prose, not paths); it may be written from the repository root
(`csrc/src/trace/trace_json.cpp`), from any folder of it (`data/forecast.py`, the package's
`python/habitat/data/forecast.py`), or from the naming file's own folder (`../cpp/` from this
one), with `{a,b}` alternatives, `*` wildcards, a `:line` or `::name` suffix. Markdown is read
whole, Python for its comments and docstrings, C++ for its comments, shell/CMake/TOML for their
`#` comments.
Left out: paths a command writes (after `-o`, `--out`, `--json`, `--save`, `>`), and the dated
records under benchmarks/results/ (each names the tree of its own commit).
"""
from __future__ import annotations

import fnmatch
import io
import os
import re
import subprocess
import tokenize
from functools import lru_cache
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]

#: Paths in other projects' trees, named where the text says whose they are.
EXTERNAL = {
    "src/enqueue.cc": "NCCL's source tree (benchmarks/collectives)",
    "src/graph/search.cc": "NCCL's source tree",
    "src/graph/tuning.cc": "NCCL's source tree",
    "src/transport/nvls.cc": "NCCL's source tree",
    "scripts/asplos/run_label_distributed.py": "NeuSight's repository",
    "data/DLmodel_configs/gpt2_large.json": "NeuSight's repository",
}
#: Build outputs: named in comments, present only after a build.
GENERATED = ("python/habitat/_build_info.py", "build/", "third_party/")
#: The installed package's layout (site-packages/habitat/...).
INSTALLED = ("habitat/weights", "habitat/*.so")
#: Records of past runs, each naming the tree of its own commit.
RECORDS = "benchmarks/results/"
#: Results named before they are committed, each with why it is not there yet.
PENDING = {
    "benchmarks/results/real-models-gpu": "the real-model GPU stage's results, copied in after a GPU "
                                          "run (benchmarks/gpu/README.md); none run yet",
    "benchmarks/results/first-step-": "the first-step GPU measurement's results, likewise",
}

_SEGMENT = r"(?:[\w.*-]|\{[\w.,*-]*\}|<[\w -]+>)+"  # <GPU>: a placeholder
_TOKEN = re.compile(rf"(?<![\w./~$@:%=+-])((?:\.\.?/)*{_SEGMENT}(?:/{_SEGMENT})+/?)")
_WRITTEN = re.compile(r"(?:\s-o|--out\w*|--json|--save|--output|>)[ =]$")
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")  # a Markdown link's target
_CXX = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)


@lru_cache(maxsize=None)
def tracked() -> tuple[str, ...]:
    """The repository's files (git's list in a clone, else a walk of the tree)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        files = [f for f in out.stdout.decode().split("\0") if f]
        if files:
            return tuple(f for f in files if (ROOT / f).exists())  # deleted, not yet committed
    except (OSError, subprocess.CalledProcessError):
        pass
    skip = {".git", "build", "third_party", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
    found = []
    for folder, subdirs, names in os.walk(ROOT):
        subdirs[:] = [d for d in subdirs if d not in skip and not d.endswith(".egg-info")]
        found += [str(Path(folder, n).relative_to(ROOT)) for n in names if not n.endswith(".so")]
    return tuple(found)


@lru_cache(maxsize=None)
def _paths() -> frozenset[str]:
    """Every tracked file and folder."""
    paths = set(tracked())
    for f in tracked():
        paths.update(str(p) for p in PurePosixPath(f).parents if str(p) != ".")
    return frozenset(paths)


@lru_cache(maxsize=None)
def _tails() -> frozenset[str]:
    """Every tracked path written from any folder above it: `data/forecast.py` and the rest."""
    tails = set()
    for path in _paths():
        parts = path.split("/")
        tails.update("/".join(parts[i:]) for i in range(len(parts)))
        stem = PurePosixPath(parts[-1]).stem  # a file named without its suffix (habitat/__init__)
        tails.update("/".join(parts[i:-1] + [stem]) for i in range(len(parts)))
    return frozenset(tails)


@lru_cache(maxsize=None)
def _names() -> frozenset[str]:
    return frozenset(PurePosixPath(p).name for p in _paths())


def prose(path: str, text: str) -> str | None:
    """The part of a file that is docs or comments (None: a file of another kind)."""
    name = PurePosixPath(path)
    if name.suffix == ".md":
        return text
    if name.suffix in (".py", ".pyi"):
        return _python_prose(text)
    if name.suffix in (".cpp", ".h", ".hpp", ".cc", ".cu"):
        return "\n".join(m.group(0) for m in _CXX.finditer(text) if not m.group(0).startswith('"'))
    if name.suffix in (".sh", ".cmake", ".toml") or name.name in ("CMakeLists.txt", "run"):
        return "\n".join(m.group(1) for m in re.finditer(r"(?:^|\s)(#.*)$", text, re.M))
    return None


def _python_prose(text: str) -> str:
    """Comments and docstrings (a string that is a statement of its own)."""
    out: list[str] = []
    previous = tokenize.NEWLINE
    statement_start = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            out.append(tok.string)
        elif tok.type == tokenize.STRING and previous in statement_start:
            out.append(tok.string)
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            previous = tok.type
    return "\n".join(out)


def _alternatives(token: str) -> list[str]:
    match = re.search(r"\{([^}]*)\}", token)
    if not match:
        return [token]
    return [t for alt in match.group(1).split(",")
            for t in _alternatives(token[:match.start()] + alt + token[match.end():])]


def _exists(source: str, token: str) -> bool:
    token = token.rstrip("/")
    if token in EXTERNAL or token in INSTALLED or any(token == g.rstrip("/") or token.startswith(g)
                                                      for g in GENERATED):
        return True
    here = ROOT / PurePosixPath(source).parent
    if token.startswith("../") or token.startswith("./"):
        from_root = os.path.relpath(os.path.normpath(here / token), ROOT)
        return from_root.startswith(tuple(PENDING)) or (here / token).exists()
    if token.startswith(tuple(PENDING)):
        return True
    if "*" in token:
        return any(fnmatch.fnmatch(p, token) or fnmatch.fnmatch(p, "*/" + token) for p in _tails())
    return token in _tails() or (here / token).exists()


def missing_paths(source: str, text: str) -> list[str]:
    """The paths `text` (the prose of `source`) names that do not exist."""
    names = _names()
    missing = []
    if source.endswith(".md"):  # a link's target is relative to its file, whatever it names
        here = ROOT / PurePosixPath(source).parent
        missing += [f"{source}: {m.group(1)}" for m in _LINK.finditer(text)
                    if ":" not in m.group(1) and not (here / m.group(1)).exists()]
    for match in _TOKEN.finditer(text):
        token = re.sub(r"(?::\d+(?:-\d+)?|::\w+)$", "", match.group(1).rstrip(".,;:)'`/"))
        token = re.sub(r"<[\w -]+>", "*", token)
        first = next((part for part in token.split("/") if part not in (".", "..")), "")
        if "..." in token or (first.startswith(".") and first != ".ci"):
            continue  # elided (tests/python/.../) or extensions (.html/.htm)
        if first not in names and not first.startswith("{"):
            continue  # prose (fp32/bf16, runs/step.json), or outside the repository (../shared/data)
        if _WRITTEN.search(text[max(0, match.start() - 12):match.start()]):
            continue
        missing += [f"{source}: {t}" for t in _alternatives(token) if not _exists(source, t)]
    return list(dict.fromkeys(missing))


def test_named_paths_exist():
    missing = []
    for source in tracked():
        if source.startswith(RECORDS) or not (ROOT / source).is_file():
            continue
        try:
            text = (ROOT / source).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        body = prose(source, text)
        if body is not None:
            missing += missing_paths(source, body)
    assert not missing, ("paths named in docs and comments that do not exist (fix the name, or "
                         "EXTERNAL in this file for another project's path):\n" + "\n".join(missing))


def test_the_scanner_reads_what_it_should():
    assert missing_paths("docs/x.md", "see `csrc/src/trace/trace_json.cpp:59` and data/forecast.py") == []
    assert missing_paths("docs/x.md", "see csrc/nowhere.cpp") == ["docs/x.md: csrc/nowhere.cpp"]
    assert missing_paths("docs/x.md", "`csrc/src/{trace,nowhere}/`") == ["docs/x.md: csrc/src/nowhere"]
    assert missing_paths("docs/x.md", "fp32/bf16, runs/step.json, python -m x --json docs/new.json") == []
    assert missing_paths("docs/x.md", "[map](architecture.md#layout) [web](https://a.b/c.md)") == []
    assert missing_paths("docs/x.md", "[gone](gone/x.md)") == ["docs/x.md: gone/x.md"]
    assert _python_prose('x = "csrc/a.cpp"  # csrc/b.cpp\n"""csrc/c.cpp"""\n') == '# csrc/b.cpp\n"""csrc/c.cpp"""'
    assert prose("a.cpp", 'f("csrc//x"); // csrc/y.cpp\n') == "// csrc/y.cpp"
