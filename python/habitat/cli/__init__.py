"""The command line: ``python -m habitat`` (also installed as ``habitat``).

    habitat devices                          the GPUs Habitat can forecast for
    habitat predict TRACE --target A100      forecast a saved trace (optionally to TensorBoard)
    habitat compare TRACE [--plot out.png]   every GPU ranked by the step as seen, cost, memory fit
    habitat compare TRACE --cluster 8xH100 --cluster 16xA100 [--parallel ddp]   clusters ranked
    habitat evaluate ...                     accuracy against measurements (habitat.evaluate)
    habitat report TRACE [-o report.html]    a self-contained HTML or Markdown report
    habitat --version

TRACE is a file saved by ``forecast.save(...)`` or a ``log_dir`` of ``predict_on`` (its
``forecast.json``).

GPUs are chosen the same way in every command: ``--target/-t GPU``, repeated or
comma-separated, ``all`` for every known GPU (``--targets`` is a deprecated alias).

Exit codes: 0 success, 1 bad input (missing or corrupt file, unknown GPU, bad price file),
2 bad usage (arguments). User errors print one message naming the problem and the fix.

Here: `main`, which runs a command and turns its errors into messages and exit codes. The
arguments are declared in ``parser.py``; each command lives in its own module (``predict.py``:
devices and predict, ``compare.py``, ``report.py``, ``evaluate.py``), with what they share:
the TRACE argument (``traces.py``), the GPUs (``targets.py``), output paths (``outputs.py``)
and the errors (``errors.py``).
"""
from __future__ import annotations

import os
import sys
from typing import Sequence

from habitat.cli.compare import cmd_compare
from habitat.cli.errors import PROG, UsageError, UserError
from habitat.cli.evaluate import cmd_evaluate
from habitat.cli.parser import build_parser
from habitat.cli.predict import cmd_devices, cmd_predict
from habitat.cli.report import cmd_report
from habitat.cli.targets import check_devices
from habitat.cli.traces import trace_argument, trace_from_stdin

__all__ = ["PROG", "UsageError", "UserError", "build_parser", "cmd_compare", "cmd_devices",
           "cmd_evaluate", "cmd_predict", "cmd_report", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["evaluate"]:  # everything after it belongs to habitat.evaluate, --help too
        argv = ["evaluate", "--", *argv[1:]]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or bad usage (2), message already printed
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    try:
        if getattr(args, "trace", None) is not None:
            args.trace = trace_argument(args.trace)
        check_devices()
        with trace_from_stdin(args):
            return int(args.run(args))
    except UserError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `habitat compare ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:  # writing an output file: no space, no permission, no such folder
        message = exc.strerror or str(exc)
        if exc.filename is not None and str(exc.filename) not in message:
            message += f": {exc.filename}"
        print(f"{PROG} {args.command}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
