"""The hostile-input table of issue 34, rerunnable as a whole: each case feeds Habitat one
damaged or hostile input (a file, an argument, an environment variable, a way of ending the
program) in a subprocess and prints its outcome.

    python benchmarks/hostile/cases.py [--only SUBSTRING] [--markdown]

A case is OK when Habitat does the right thing: a one-line error (no traceback, no signal,
exit 1 or 2) whose message names what is expected, or success where the input is fine, within
its time limit. Results: benchmarks/results/hostile-input.md.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


@dataclass
class Case:
    name: str
    argv: Callable[[Path], list[str]]  # the command, given a scratch folder
    expect: str  # "error" (one line, exit 1/2) or "ok" (exit 0)
    says: str = ""  # what the message (or stdout for "ok") must contain
    env: dict[str, str] = field(default_factory=dict)
    stdin: Callable[[Path], Path] | None = None
    timeout: float = 120.0


def trace(ops: list[dict] | None = None, origin: dict | None = None, **step: object) -> dict:
    ops = ops if ops is not None else [MM]
    return {"format": "habitat-trace", "version": 2, "origin": origin or {"device": "cpu"},
            "steps": [{"index": 0, "wall_ms": 1.0, "ops": ops, **step}]}


def tensor(shape: list, dtype: str = "float32") -> dict:
    return {"shape": shape, "dtype": dtype}


MM = {"id": 0, "name": "aten::mm", "wall_us": 40.0,
      "args": [{"name": "self", "tensor": tensor([64, 128])}, {"name": "mat2", "tensor": tensor([128, 32])}],
      "outputs": [tensor([64, 32])]}


def op(**changes: object) -> dict:
    return {**MM, **changes}


def write(name: str, content: str | bytes | dict) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / name
        if isinstance(content, dict):
            path.write_text(json.dumps(content))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path
    return make


def predict(make: Callable[[Path], Path], *extra: str) -> Callable[[Path], list[str]]:
    return lambda d: ["-m", "habitat", "predict", str(make(d)), "-t", "A100", *extra]


def compare(*extra: str) -> Callable[[Path], list[str]]:
    return lambda d: ["-m", "habitat", "compare", str(write("t.json", trace())(d)), "-t", "A100", *extra]


def python(code: str) -> Callable[[Path], list[str]]:
    return lambda d: ["-c", code.replace("{d}", str(d))]


def deep(n: int) -> str:
    return "[" * n + "]" * n


def fifo(d: Path) -> Path:
    path = d / "trace.fifo"
    os.mkfifo(path)
    return path


def symlink_loop(d: Path) -> Path:
    (d / "a.json").symlink_to(d / "b.json")
    (d / "b.json").symlink_to(d / "a.json")
    return d / "a.json"


def gzip_bomb(d: Path) -> Path:
    """Two gzip members of 2 GiB of spaces each (~2 MB each: deflate's ~1000:1 at any level).
    4 GiB is past the default byte cap (1/8 of the memory available) below 32 GB available;
    one 2 GiB member alone is within it where more than 17.2 GB are available, and read."""
    path = d / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        for _ in range(2048):
            f.write(b" " * (1 << 20))
    member = path.read_bytes()
    path.write_bytes(member + member)
    return path


def one_op_steps(n: int) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / "steps.json"
        one = json.dumps({"id": 0, "name": "aten::relu", "args": [{"name": "self", "tensor": tensor([8])}]})
        with open(path, "w") as f:
            f.write('{"format": "habitat-trace", "version": 2, "origin": {"device": "cpu"}, "steps": [')
            for i in range(n):
                f.write(("," if i else "") + f'{{"index": {i}, "wall_ms": 1.0, "ops": [{one}]}}')
            f.write("]}")
        return path
    return make


def devices_file(doc: dict | str) -> Callable[[Path], Path]:
    return write("devices.json", doc)


DEVICE = {"compute_capability": "8.0", "sms": 108, "boost_clock_mhz": 1410, "memory_gb": 80,
          "memory_bandwidth_gbs": 2039, "l2_mb": 40, "tdp_w": 400, "peak_tflops": {"fp32": 19.5}}

TRAINING = """
import os, signal, sys, time, torch, habitat
torch.manual_seed(0)
model = torch.nn.Linear(64, 64); opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 64)
p = habitat.predict_on("A100", log_dir="{d}/logs")
for i in range(STEPS):
    with p as fc:
        loss = model(x).pow(2).mean(); loss.backward(); opt.step(); opt.zero_grad()
    if i == STEPS - 1:
        END
"""


def training(steps: int, end: str) -> Callable[[Path], list[str]]:
    return python(TRAINING.replace("STEPS", str(steps)).replace("END", end))


def log_rows(d: Path) -> str:
    """What a run left in its log_dir: complete lines of steps.jsonl, steps in forecast.json."""
    history = d / "logs" / "steps.jsonl"
    rows = history.read_bytes().count(b"\n") if history.exists() else 0
    try:
        steps = len(json.loads((d / "logs" / "forecast.json").read_text())["forecast"]["steps"])
    except (OSError, ValueError, KeyError):
        steps = 0
    return f"{rows} rows, forecast.json {steps} steps"


CASES: list[Case] = [
    # ---- trace files: what the file is --------------------------------------------------
    Case("trace: missing file", predict(lambda d: d / "nope.json"), "error", "does not exist"),
    Case("trace: a directory", predict(lambda d: d), "error", "is a folder"),
    Case("trace: empty file", predict(write("t.json", "")), "error", "not valid JSON"),
    Case("trace: not JSON", predict(write("t.json", "hello")), "error", "not valid JSON"),
    Case("trace: binary garbage", predict(write("t.json", bytes(range(256)) * 4)), "error", "invalid habitat trace"),
    Case("trace: truncated JSON", predict(write("t.json", json.dumps(trace())[:60])), "error", "not valid JSON"),
    Case("trace: UTF-8 BOM", predict(write("t.json", "\ufeff" + json.dumps(trace()))), "ok", "A100"),
    Case("trace: invalid UTF-8 in a name", predict(write("t.json", json.dumps(trace([op(name="aten::mm")])).replace("aten::mm", "aten::\\udcff").encode())), "error", "invalid habitat trace"),
    Case("trace: FIFO", predict(fifo), "error", "FIFO", timeout=20),
    Case("trace: /dev/zero", predict(lambda d: Path("/dev/zero")), "error", "character device", timeout=20),
    Case("trace: /dev/null", predict(lambda d: Path("/dev/null")), "error", "character device"),
    Case("trace: symlink loop", predict(symlink_loop), "error", "loops"),
    Case("trace: from standard input", lambda d: ["-m", "habitat", "predict", "-", "-t", "A100"], "ok", "A100",
         stdin=write("t.json", trace())),
    Case("trace: gzip", predict(write("t.json.gz", gzip.compress(json.dumps(trace()).encode()))), "ok", "A100"),
    Case("trace: gzip of two members", predict(write("t.json.gz", gzip.compress(json.dumps(trace()).encode()[:30]) + gzip.compress(json.dumps(trace()).encode()[30:]))), "ok", "A100"),
    Case("trace: truncated gzip", predict(write("t.json.gz", gzip.compress(json.dumps(trace()).encode())[:-10])), "error", "damaged gzip"),
    Case("trace: gzip of garbage", predict(write("t.json.gz", b"\x1f\x8b" + os.urandom(200))), "error", "damaged gzip"),
    Case("trace: gzip bomb (4 MB -> 4 GiB)", predict(gzip_bomb), "error", "HABITAT_MAX_INPUT_BYTES", timeout=60),
    Case("trace: over the byte cap", predict(write("t.json", trace())), "error", "HABITAT_MAX_INPUT_BYTES=",
         env={"HABITAT_MAX_INPUT_BYTES": "100"}),
    Case("trace: byte cap variable not a number", predict(write("t.json", trace())), "error", "is not a positive whole number",
         env={"HABITAT_MAX_INPUT_BYTES": "lots"}),
    Case("trace: 500k one-op steps (117 MB)", predict(one_op_steps(500_000)), "error", "HABITAT_MAX_TRACE_STEPS", timeout=300),
    Case("trace: over the step cap", predict(one_op_steps(5)), "error", "HABITAT_MAX_TRACE_STEPS=5",
         env={"HABITAT_MAX_TRACE_STEPS": "4"}),
    Case("trace: over the op cap", predict(one_op_steps(5)), "error", "HABITAT_MAX_TRACE_OPS=5",
         env={"HABITAT_MAX_TRACE_OPS": "4"}),
    # ---- trace files: the document ------------------------------------------------------
    Case("trace: a JSON list, not an object", predict(write("t.json", "[]")), "error", "expected a JSON object"),
    Case("trace: wrong format name", predict(write("t.json", {**trace(), "format": "chrome"})), "error", "habitat-trace"),
    Case("trace: newer version", predict(write("t.json", {**trace(), "version": 99})), "error", "upgrade habitat"),
    Case("trace: version 0", predict(write("t.json", {**trace(), "version": 0})), "error", "unsupported version"),
    Case("trace: no steps field", predict(write("t.json", {k: v for k, v in trace().items() if k != "steps"})), "error", "steps: missing"),
    Case("trace: no steps", predict(write("t.json", {**trace(), "steps": []})), "error", "holds no step"),
    Case("trace: steps not a list", predict(write("t.json", {**trace(), "steps": {}})), "error", "expected an array"),
    Case("trace: nested 100,000 deep", predict(write("t.json", deep(100000))), "error", "nested more than 256"),
    Case("trace: nested 300 deep in an arg", predict(write("t.json", json.dumps(trace()).replace('"wall_us": 40.0', '"x": ' + deep(300)))), "error", "nested more than 256"),
    Case("trace: unknown keys", predict(write("t.json", {**trace(), "extra": {"a": 1}})), "ok", "A100"),
    Case("trace: duplicate keys", predict(write("t.json", json.dumps(trace()).replace('"version": 2', '"version": 99, "version": 2'))), "ok", "A100"),
    Case("trace: NaN literal", predict(write("t.json", json.dumps(trace()).replace("40.0", "NaN"))), "error", "not valid JSON"),
    Case("trace: Infinity literal", predict(write("t.json", json.dumps(trace()).replace("40.0", "Infinity"))), "error", "not valid JSON"),
    Case("trace: number 1e400", predict(write("t.json", json.dumps(trace()).replace("40.0", "1e400"))), "error", "not valid JSON"),
    Case("trace: negative shape", predict(write("t.json", trace([op(outputs=[tensor([-1, 32])])]))), "error", "must be >= 0"),
    Case("trace: shape of 2^64", predict(write("t.json", trace([op(outputs=[tensor([2**64, 32])])]))), "error", "out of range"),
    Case("trace: shape of 2^63-1", predict(write("t.json", trace([op(outputs=[tensor([2**63 - 1, 1])])]))), "error", "2^48 elements"),
    Case("trace: 2^60 elements", predict(write("t.json", trace([op(outputs=[tensor([2**30, 2**30])])]))), "error", "2^48 elements"),
    Case("trace: unknown dtype", predict(write("t.json", trace([op(outputs=[tensor([1], "float99")])]))), "error", "unknown dtype"),
    Case("trace: unknown device", predict(write("t.json", trace([op(outputs=[{"shape": [1], "device": "tpu"}])]))), "error", "unknown device"),
    Case("trace: unknown phase", predict(write("t.json", trace([op(phase="lunch")]))), "error", "unknown phase"),
    Case("trace: duplicate op id", predict(write("t.json", trace([MM, MM]))), "error", "duplicate op id"),
    Case("trace: parent missing", predict(write("t.json", trace([op(parent=7)]))), "error", "not found in this step"),
    Case("trace: parent is itself", predict(write("t.json", trace([op(parent=0)]))), "error", "the op itself"),
    Case("trace: parent cycle", predict(write("t.json", trace([op(id=0, parent=1), op(id=1, parent=0)]))), "error", "cycle"),
    Case("trace: negative wall_ms", predict(write("t.json", trace(wall_ms=-1))), "error", "must be >= 0"),
    Case("trace: wall_ms 1e300", predict(write("t.json", trace(wall_ms=1e300))), "error", "at most 1e12"),
    Case("trace: kernel duration 1e300", predict(write("t.json", trace([op(kernels=[{"name": "k", "duration_us": 1e300}])]))), "error", "at most 1e12"),
    Case("trace: kernel stream 2^40", predict(write("t.json", trace([op(kernels=[{"name": "k", "stream": 2**40}])]))), "error", "out of range"),
    Case("trace: kernel negative grid", predict(write("t.json", trace([op(kernels=[{"name": "k", "grid": [-1, 1, 1]}])]))), "error", "grid"),
    Case("trace: arg with two values", predict(write("t.json", trace([op(args=[{"name": "x", "int": 1, "float": 2.0}])]))), "error", "exactly one value"),
    Case("trace: negative kernel_size", predict(write("t.json", trace([{"id": 0, "name": "aten::max_pool2d", "args": [{"name": "self", "tensor": tensor([1, 3, 8, 8])}, {"name": "kernel_size", "ints": [-2, -2]}], "outputs": [tensor([1, 3, 4, 4])]}]))), "error", "aten::max_pool2d"),
    Case("trace: inconsistent mm shapes", predict(write("t.json", trace([op(outputs=[tensor([5, 7])])]))), "error", "aten::mm"),
    Case("trace: 10 MB op name", predict(write("t.json", trace([op(name="aten::" + "x" * 10_000_000)]))), "ok", "A100"),
    Case("trace: NUL in a module path", predict(write("t.json", trace([op(module_path="a\u0000b")]))), "ok", "A100"),
    Case("trace: ANSI escape in a module path", predict(write("t.json", trace([op(module_path="\u001b[2Jx")]))), "ok", "\\x1b"),
    Case("trace: ops dropped by max_ops_per_step", predict(write("t.json", trace(dropped_ops=29000))), "ok", "29000"),
    Case("trace: deep forecast.targets, no -t", lambda d: ["-m", "habitat", "predict", str(write("t.json", json.dumps(trace())[:-1] + ', "forecast": {"targets": ' + deep(50000) + "}}")(d))], "error", ""),
    # ---- command line ---------------------------------------------------------------------
    Case("cli: --epochs nan", compare("--epochs", "nan", "--steps-per-epoch", "10"), "error", "argument --epochs"),
    Case("cli: --epochs inf", compare("--epochs", "inf", "--steps-per-epoch", "10"), "error", "argument --epochs"),
    Case("cli: --epochs -1", compare("--epochs", "-1", "--steps-per-epoch", "10"), "error", "argument --epochs"),
    Case("cli: --reserve-gib nan", compare("--reserve-gib", "nan"), "error", "argument --reserve-gib"),
    Case("cli: --reserve-gib inf", compare("--reserve-gib", "inf"), "error", "argument --reserve-gib"),
    Case("cli: --host-speed 0", compare("--host-speed", "0"), "error", "argument --host-speed"),
    Case("cli: --host-speed nan", compare("--host-speed", "nan"), "error", "argument --host-speed"),
    Case("cli: --world-size 0", compare("--world-size", "0"), "error", "argument --world-size"),
    Case("cli: --iterations 0", compare("--iterations", "0"), "error", "argument --iterations"),
    Case("cli: --steps-per-epoch 0", compare("--epochs", "1", "--steps-per-epoch", "0"), "error", "argument --steps-per-epoch"),
    Case("cli: --price A100=nan", compare("--price", "A100=nan"), "error", "--price"),
    Case("cli: --price A100=-1", compare("--price", "A100=-1"), "error", "--price"),
    Case("cli: --prices missing", compare("--prices", "/nonexistent.json"), "error", "does not exist"),
    Case("cli: --prices nested 50,000 deep", lambda d: ["-m", "habitat", "compare", str(write("t.json", trace())(d)), "-t", "A100", "--prices", str(write("p.json", '{"A100": ' + deep(50000) + "}")(d))], "error", "nested more than 256"),
    Case("cli: --prices a FIFO", lambda d: ["-m", "habitat", "compare", str(write("t.json", trace())(d)), "-t", "A100", "--prices", str(fifo(d))], "error", "FIFO", timeout=20),
    Case("cli: --prices garbage CSV", lambda d: ["-m", "habitat", "compare", str(write("t.json", trace())(d)), "-t", "A100", "--prices", str(write("p.csv", "a,b\n1,2\n")(d))], "error", "header"),
    Case("cli: unknown GPU", predict(write("t.json", trace()), "-t", "A1000000"), "error", "unknown GPU"),
    Case("cli: all GPUs", lambda d: ["-m", "habitat", "compare", str(write("t.json", trace())(d))], "ok", "H100"),
    Case("cli: report to .txt", lambda d: ["-m", "habitat", "report", str(write("t.json", trace())(d)), "-o", str(d / "r.txt")], "error", ".html"),
    Case("cli: --save in a missing folder", predict(write("t.json", trace()), "--save", "/nonexistent/x.json"), "error", "does not exist"),
    Case("cli: Markdown report of hostile names", lambda d: ["-c", "import sys, habitat.cli as c; r = c.main(['report', sys.argv[1], '-t', 'A100', '-o', sys.argv[2]]); t = open(sys.argv[2]).read(); print('raw markup' if '<script>' in t or '<img src=x' in t else 'escaped'); sys.exit(r)", str(write("t.json", trace([op(module_path="<img src=x onerror=alert(1)>", name="aten::<script>")]))(d)), str(d / "r.md")], "ok", "escaped"),
    Case("cli: HTML report of hostile names", lambda d: ["-c", "import sys, habitat.cli as c; r = c.main(['report', sys.argv[1], '-t', 'A100', '-o', sys.argv[2]]); t = open(sys.argv[2]).read(); print('raw markup' if '<script>' in t or '<img src=x' in t else 'escaped'); sys.exit(r)", str(write("t.json", trace([op(module_path="<img src=x onerror=alert(1)>", name="aten::<script>")]))(d)), str(d / "r.html")], "ok", "escaped"),
    # ---- environment --------------------------------------------------------------------
    Case("env: HABITAT_DEVICES nested 100,000 deep", lambda d: ["-m", "habitat", "devices"], "error", "nested more than 256",
         env={"HABITAT_DEVICES": "{d}/devices.json"}, stdin=devices_file('{"devices": [{"name": "A100", "memory_gb": ' + deep(100000) + "}]}")),
    Case("env: HABITAT_DEVICES missing file", lambda d: ["-m", "habitat", "devices"], "error", "not a file",
         env={"HABITAT_DEVICES": "/nonexistent.json"}),
    Case("env: HABITAT_DEVICES a FIFO", lambda d: ["-m", "habitat", "devices"], "error", "not a file",
         env={"HABITAT_DEVICES": "{d}/trace.fifo"}, stdin=fifo, timeout=20),
    Case("env: HABITAT_DEVICES bandwidth 1e-300", lambda d: ["-m", "habitat", "devices"], "error", "memory_bandwidth_gbs",
         env={"HABITAT_DEVICES": "{d}/devices.json"}, stdin=devices_file({"devices": [{"name": "A100", "memory_bandwidth_gbs": 1e-300}]})),
    Case("env: HABITAT_DEVICES 20,000 GPUs", lambda d: ["-m", "habitat", "devices"], "ok", "GPU19999",
         env={"HABITAT_DEVICES": "{d}/devices.json"}, stdin=devices_file({"devices": [{"name": f"GPU{i}", **DEVICE} for i in range(20000)]}), timeout=30),
    Case("env: HABITAT_DEVICES bad JSON", lambda d: ["-m", "habitat", "devices"], "error", "malformed JSON",
         env={"HABITAT_DEVICES": "{d}/devices.json"}, stdin=devices_file("{")),
    Case("env: HABITAT_PRICES nested deep", compare(), "error", "nested more than 256",
         env={"HABITAT_PRICES": "{d}/devices.json"}, stdin=devices_file('{"A100": ' + deep(50000) + "}")),
    Case("env: HABITAT_HOST_MODEL broken", predict(write("t.json", trace())), "error", "HABITAT_HOST_MODEL",
         env={"HABITAT_HOST_MODEL": "{d}/devices.json"}, stdin=devices_file({"version": 1})),
    Case("env: HABITAT_WEIGHTS pointing nowhere", predict(write("t.json", trace())), "error", "HABITAT_WEIGHTS",
         env={"HABITAT_WEIGHTS": "/nonexistent/weights"}),
    # ---- a training run -------------------------------------------------------------------
    Case("run: predictor left open, normal exit", training(15, "pass"), "ok", "", timeout=180),
    Case("run: Ctrl-C (SIGINT) at the last step", training(15, "os.kill(os.getpid(), signal.SIGINT)"), "error", "", timeout=180),
    Case("run: SIGTERM at the last step", training(15, "os.kill(os.getpid(), signal.SIGTERM)"), "error", "", timeout=180),
    Case("run: log_dir=''", python("import habitat\ntry:\n    habitat.predict_on('A100', log_dir='')\nexcept ValueError as e:\n    raise SystemExit(str(e))"), "error", "log_dir"),
    Case("run: fork with an open predictor", python(TRAINING.replace("STEPS", "3").replace("END", "pass") + "\npid = os.fork()\nif pid == 0:\n    print(len(fc.steps)); os._exit(0)\nos.waitpid(pid, 0)"), "ok", "3", timeout=60),
]


@dataclass
class Outcome:
    ok: bool
    text: str
    seconds: float
    peak_mb: float


def without_usage(lines: list[str]) -> list[str]:
    """stderr less argparse's usage block ("usage: ..." and its indented continuation lines),
    which argparse prints before its one-line error."""
    kept: list[str] = []
    in_usage = False
    for line in lines:
        in_usage = line.startswith("usage:") or (in_usage and line.startswith(" "))
        if not in_usage:
            kept.append(line)
    return kept


def run_case(case: Case) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="habitat-hostile-") as folder:
        d = Path(folder)
        stdin_path = case.stdin(d) if case.stdin is not None else None
        argv = [sys.executable, *case.argv(d)]
        env = {**os.environ, **{k: v.replace("{d}", str(d)) for k, v in case.env.items()}}
        use_stdin = stdin_path is not None and "predict" in argv and "-" in argv
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.monotonic()
        try:
            with (open(stdin_path, "rb") if use_stdin else open(os.devnull, "rb")) as stdin:
                result = subprocess.run(argv, stdin=stdin, capture_output=True, text=True,
                                        env=env, timeout=case.timeout, errors="replace")
        except subprocess.TimeoutExpired:
            return Outcome(False, f"hung: killed after {case.timeout:.0f} s", case.timeout, 0.0)
        seconds = time.monotonic() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        peak_mb = peak / 1024 if peak > before else 0.0
        if case.name.startswith("run:") and (d / "logs").exists():
            extra = f" [{log_rows(d)}]"
        else:
            extra = ""
        return judge(case, result, extra, seconds, peak_mb)


def judge(case: Case, result: subprocess.CompletedProcess[str], extra: str, seconds: float,
          peak_mb: float) -> Outcome:
    """The outcome of a case's finished subprocess; `extra` is what its log_dir kept."""
    err = [line for line in result.stderr.strip().splitlines() if line.strip()
           and "Warning" not in line and "warnings.warn" not in line]
    err = without_usage(err)
    if case.name.startswith("run:") and "at the last step" in case.name and extra:
        # ended by a signal at its last step: the case is the data kept (the traceback, if any, is
        # Python's own KeyboardInterrupt from the user's loop)
        ok = "15 rows, forecast.json 15" in extra
        return Outcome(ok, f"exit {result.returncode}: {err[-1][:110] if err else ''}{extra}", seconds, peak_mb)
    if result.returncode < 0:
        return Outcome(False, f"killed by signal {-result.returncode}{extra}", seconds, peak_mb)
    if "Traceback" in result.stderr:
        return Outcome(False, f"traceback: {err[-1][:110] if err else ''}{extra}", seconds, peak_mb)
    if case.expect == "ok":
        ok = result.returncode == 0 and case.says in result.stdout
        text = (f"exit 0{extra}" if ok else f"exit {result.returncode}: {(err[-1] if err else result.stdout[-110:])[:110]}{extra}")
        if case.name.startswith("run:") and extra and "15 rows, forecast.json 15" not in extra and "left open" in case.name:
            ok = False
        return Outcome(ok, text, seconds, peak_mb)
    message = err[-1] if err else ""
    ok = result.returncode in (1, 2) and len(err) <= 2 and case.says in result.stderr
    return Outcome(ok, f"exit {result.returncode}: {message[:110]}{extra}", seconds, peak_mb)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases whose name contains this")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or args.only in c.name]
    ok = 0
    if args.markdown:
        print("| case | outcome | OK | s |\n|---|---|---|---|")
    for case in cases:
        outcome = run_case(case)
        ok += outcome.ok
        mark = "OK" if outcome.ok else "NOT OK"
        text = outcome.text.replace("|", "\\|")
        if args.markdown:
            print(f"| {case.name} | {text} | {mark} | {outcome.seconds:.1f} |", flush=True)
        else:
            print(f"{mark:6}  {case.name:45}  {outcome.text}  ({outcome.seconds:.1f} s)", flush=True)
    print(f"\n{ok} of {len(cases)} cases OK")
    return 0 if ok == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
