"""The command line's arguments: every command, its options and help text, and the checks
on numbers that argparse reports as usage errors (exit code 2)."""
from __future__ import annotations

import argparse
import math
from typing import Any, Sequence

from habitat.cli.compare import cmd_compare
from habitat.cli.errors import PROG
from habitat.cli.evaluate import cmd_evaluate
from habitat.cli.predict import cmd_devices, cmd_predict
from habitat.cli.report import cmd_report


# ----- numbers from the command line ------------------------------------------------------
def _number(kind: type, minimum: float, maximum: float, *, inclusive: bool) -> Any:
    """An argparse type: a finite `kind` (int or float) >= or > `minimum` and at most `maximum`
    (past which the run-length and cluster arithmetic would overflow); argparse reports
    anything else as a usage error naming the option ("argument --epochs: ...")."""
    bound = f"{'>=' if inclusive else '>'} {minimum:g} and <= {maximum:g}"
    noun = "a whole number" if kind is int else "a finite number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun} {bound}, got {text!r}") from None
        if (not math.isfinite(value) or value < minimum or value > maximum
                or (value == minimum and not inclusive)):
            raise argparse.ArgumentTypeError(f"expected {noun} {bound}, got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


_count = _number(int, 0, 1e15, inclusive=False)  # iterations, steps per epoch
_gpus = _number(int, 0, 1e6, inclusive=False)  # world size, GPUs per node
_epochs = _number(float, 0, 1e9, inclusive=False)
_speed = _number(float, 1e-3, 1e3, inclusive=True)  # the host's speed relative to the traced one
_gib = _number(float, 0, 1e6, inclusive=True)


# ----- options shared by commands ---------------------------------------------------------
def _target_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--target", "-t", action="append", metavar="GPU",
                   help=help + "; repeat or comma-separate, `all` for every known GPU "
                        "(`habitat devices` lists them)")
    p.add_argument("--targets", action="append", dest="targets_deprecated", help=argparse.SUPPRESS)
    p.add_argument("--host-speed", type=_speed, default=1.0, metavar="X",
                   help="the host's speed relative to the traced one for the step as seen "
                        "(host launch cadence included; default 1.0, 2.0 = twice as fast)")


def _run_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("run length and prices")
    g.add_argument("--iterations", type=_count, default=1000, metavar="N",
                   help="training iterations to price (default 1000)")
    g.add_argument("--epochs", type=_epochs, metavar="E", help="price E epochs instead (needs --steps-per-epoch)")
    g.add_argument("--steps-per-epoch", type=_count, metavar="S", help="training steps in one epoch")
    g.add_argument("--prices", metavar="FILE",
                   help="price file overriding the dated defaults (JSON {\"A100\": 1.89} or CSV gpu,usd_per_hour)")
    g.add_argument("--price", action="append", metavar="GPU=USD",
                   help="one price override in USD per GPU-hour, e.g. --price A100=1.89 (repeatable)")
    g.add_argument("--reserve-gib", type=_gib, default=1.0, metavar="GIB",
                   help="memory kept free for the CUDA context and allocator slack when checking fit (default 1)")


class _VersionAction(argparse.Action):
    """``--version``: read only when asked (the version module imports nothing)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from habitat._version import __version__

        print(f"{PROG} {__version__}")
        parser.exit()


# ----- the commands -----------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Forecast PyTorch training steps on GPUs you do not have.",
        epilog="Run `habitat COMMAND --help` for a command's options.")
    parser.add_argument("--version", action=_VersionAction, help="print Habitat's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("devices", help="list the GPUs Habitat knows")
    p.set_defaults(run=cmd_devices)

    p = sub.add_parser("predict", help="forecast a saved trace for target GPUs")
    p.add_argument("trace", help="trace file saved by Habitat (forecast.save), or a log_dir; - reads standard input")
    _target_option(p, "target GPU (default: the trace's targets)")
    p.add_argument("--log-dir", metavar="DIR", help="also write TensorBoard logs to DIR")
    p.add_argument("--save", metavar="FILE", help="save the forecast (trace plus summary) as JSON")
    p.add_argument("--json", action="store_true", help="print the per-step summary as JSON")
    p.set_defaults(run=cmd_predict)

    p = sub.add_parser("compare", help="rank every GPU by the step as seen, its cost and memory fit")
    p.add_argument("trace", help="trace file saved by Habitat, or a log_dir; - reads standard input")
    _target_option(p, "GPUs to compare (default: all)")
    _run_options(p)
    p.add_argument("--plot", metavar="FILE", help="draw time and cost per GPU to FILE (.png, .svg, .pdf)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    g = p.add_argument_group("clusters (multi-GPU forecasts; the trace is one replica's step)")
    g.add_argument("--cluster", action="append", metavar="NxGPU[:LINK[:NET]]",
                   help="a cluster to rank, e.g. 8xH100, 16xA100:nvlink:infiniband (repeatable)")
    g.add_argument("--world-size", type=_gpus, metavar="N", help="N GPUs of every --target")
    g.add_argument("--interconnect", metavar="LINK", help="nvlink, pcie or a tier (habitat.analysis.cluster)")
    g.add_argument("--network", metavar="NET", help="infiniband, ethernet or a tier, between nodes")
    g.add_argument("--gpus-per-node", type=_gpus, metavar="G", help="default: the GPU's usual server")
    g.add_argument("--parallel", metavar="P", help="ddp (default), fsdp, tp, pp, or e.g. dp2,tp4 / pp4x8")
    p.set_defaults(run=cmd_compare)

    p = sub.add_parser("evaluate", help="measure forecast accuracy (see `habitat evaluate --help`)",
                       add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for habitat.evaluate")
    p.set_defaults(run=cmd_evaluate)

    p = sub.add_parser("report", help="write a self-contained HTML or Markdown report")
    p.add_argument("trace", help="trace file saved by Habitat, or a log_dir; - reads standard input")
    p.add_argument("--output", "-o", default="report.html", metavar="FILE",
                   help="report file: .html or .md (default: report.html)")
    _target_option(p, "GPUs to compare and forecast in detail (default: all compared, the "
                      "trace's targets in detail)")
    _run_options(p)
    p.set_defaults(run=cmd_report)
    return parser
