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
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

if TYPE_CHECKING:
    from habitat.data.forecast import Forecast

PROG = "habitat"


class UserError(Exception):
    """Bad input from the user: reported as one line on stderr, exit code 1."""

    exit_code = 1


class UsageError(UserError):
    """Arguments that do not go together: exit code 2, like argparse's own errors."""

    exit_code = 2


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


# ----- helpers ---------------------------------------------------------------------------
def _load_trace(path: str) -> dict[str, Any]:
    p = _check_trace_path(path)
    from habitat.data.trace import load_trace
    from habitat.present.progress import status

    try:
        with status(f"loading {path} ({p.stat().st_size / 1e6:.1f} MB)"):
            return load_trace(p)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        message = str(exc)
        # Trace errors already name the file; other errors get it added.
        raise UserError(message if path in message else f"cannot read trace {path!r}: {message}") from None


def _trace_targets(path: str) -> list[str]:
    """The targets a saved forecast names ("forecast": {"targets": [...]}), if any: the
    forecast section is the document's last key, so only the end of the file is read (a
    whole-file read only when the section is not found there). A damaged file is reported
    here, not taken for one that names no targets."""
    from habitat.data.forecast import saved_targets_of_file

    _check_trace_path(path)
    try:
        return saved_targets_of_file(path) or []
    except RecursionError:
        raise UserError(f"cannot read trace {path!r}: its JSON nests too deeply (a damaged or "
                        "hostile file)") from None
    except (OSError, ValueError) as exc:
        message = str(exc)
        raise UserError(message if path in message else f"cannot read trace {path!r}: {message}") from None


def _check_devices() -> None:
    """A broken HABITAT_DEVICES file is a user error of every command, reported first."""
    from habitat.data.devices import check_devices

    try:
        check_devices()
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _split_names(values: Sequence[str] | None) -> list[str]:
    names: list[str] = []
    for value in values or []:
        names.extend(v.strip() for v in value.split(",") if v.strip())
    return names


def _resolve_targets(values: Sequence[str] | None, allow_all: bool) -> list[str]:
    """GPU names (repeated and/or comma-separated) to canonical names; ``all`` is every known
    GPU, and so is no name at all where `allow_all` (compare, report)."""
    from habitat.data.devices import devices, get_device

    names = _split_names(values)
    if any(n.lower() == "all" for n in names) or (allow_all and not names):
        return [d.name for d in devices()]
    resolved = []
    for name in names:
        try:
            resolved.append(get_device(name).name)
        except (KeyError, ValueError, LookupError, RuntimeError) as exc:
            # The device database's message names the GPU, the closest ones and the fix.
            raise UserError(exc.args[0] if exc.args else f"unknown GPU {name!r}") from None
    return list(dict.fromkeys(resolved))


def _trace_argument(path: str) -> str:
    """The trace file a TRACE argument names: a folder stands for its ``forecast.json`` (a
    ``predict_on(..., log_dir=...)``, or a folder holding one run's); a step history
    (``steps.jsonl``) is named for what it is, with the file to give instead."""
    from habitat.capture.sinks import FORECAST_FILE, HISTORY_FILE

    p = Path(path)
    if p.is_dir():
        if (p / FORECAST_FILE).is_file():
            return str(p / FORECAST_FILE)
        runs = sorted(str(f) for f in p.glob(f"*/{FORECAST_FILE}"))
        if len(runs) == 1:
            return runs[0]
        if runs:
            raise UserError(f"{path!r} holds several runs: name one, e.g. {PROG} compare {runs[0]} "
                            f"(found {', '.join(runs)})")
        raise UserError(f"{path!r} is a folder without a {FORECAST_FILE}: give a trace file saved "
                        "with forecast.save('step.json'), or the log_dir of "
                        "habitat.predict_on(..., log_dir=...)")
    if p.name == HISTORY_FILE or p.suffix == ".jsonl":
        beside = p.with_name(FORECAST_FILE)
        raise UserError(f"{path!r} is a step history (one line of totals per step), not a trace: "
                        + (f"give {str(beside)!r} or its folder instead" if beside.is_file() else
                           f"give the {FORECAST_FILE} of the same log_dir, or a trace saved with "
                           "forecast.save('step.json')"))
    return path


def _check_trace_path(path: str) -> Path:
    """The trace file, checked before any work: it exists, is a regular file and is readable
    (each problem named with its fix)."""
    from habitat.data.input_files import InputLimitError, open_input

    p = Path(path)
    try:
        os.stat(p)
    except FileNotFoundError:
        raise UserError(f"trace file {path!r} does not exist: check the path (save one with "
                        "forecast.save('trace.json'), or habitat.predict_on(..., log_dir='runs/x') "
                        "writes runs/x/forecast.json)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"trace file {path!r} is a symbolic link that loops (it leads back to "
                            "itself): point it at the trace file") from None
        raise UserError(f"cannot read trace file {path!r}: {exc.strerror or exc}") from None
    if p.is_dir():
        raise UserError(f"{path!r} is a directory: give the trace file (a .json saved by Habitat)")
    try:
        open_input(p, "trace file").close()
    except PermissionError:
        raise UserError(f"cannot read trace file {path!r}: permission denied; make it readable "
                        f"(chmod +r {path}) or copy it somewhere you can read") from None
    except (OSError, InputLimitError) as exc:
        raise UserError(str(exc)) from None
    return p


def _forecast_file(path: str, targets: list[str], host_speed: float = 1.0, *,
                   keep_all: bool = False) -> "Forecast":
    """Forecasts every step of the trace file: read once, parsed and forecast by the engine
    (no Python object per op unless an output reads per-op detail); a status line on stderr
    when it takes over a second."""
    from habitat.data.engine import SettingError
    from habitat.data.forecast import DEFAULT_KEEP_STEPS, Forecast
    from habitat.present.progress import status

    keep_steps = None if keep_all else DEFAULT_KEEP_STEPS  # keep_all: every step's detail (--save)
    p = _check_trace_path(path)
    try:
        with status(f"forecasting {path} ({p.stat().st_size / 1e6:.1f} MB) for {len(targets)} GPU(s)"):
            forecast = Forecast.load(p, targets=targets, host_speed=host_speed, keep_steps=keep_steps)
    except SettingError as exc:  # HABITAT_WEIGHTS, HABITAT_HOST_MODEL: not the trace's fault
        raise UserError(str(exc)) from None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        message = str(exc)
        raise UserError(message if path in message else f"cannot read trace {path!r}: {message}") from None
    if not forecast.steps:
        raise UserError(f"trace {path!r} holds no step: capture at least one training step")
    return forecast


def _forecast(doc: dict[str, Any], targets: list[str], path: str, *, steps: str = "all",
              log_dir: str | None = None, keep_all: bool = False) -> "Forecast":
    """Forecasts the trace's steps (all, or only the last) with a progress bar."""
    from habitat.data.forecast import Forecast
    from habitat.present.progress import progress

    chosen = doc["steps"] if steps == "all" else doc["steps"][-1:]
    if not chosen:
        raise UserError(f"trace {path!r} holds no step: capture at least one training step")
    forecast = Forecast(targets, doc["origin"], **({"keep_steps": None} if keep_all else {}))
    logger = None
    if log_dir is not None:
        from habitat.present.tensorboard import TensorBoardLogger

        try:
            logger = TensorBoardLogger(log_dir)
        except ImportError as exc:
            raise UserError(str(exc)) from None
    try:
        for step in progress(chosen, desc=f"forecasting {len(targets)} GPU(s)"):
            try:
                fc = forecast.add_step(step)
            except (ValueError, RuntimeError) as exc:
                raise UserError(f"cannot forecast step {step.get('index', '?')} of {path!r}: {exc}") from None
            if logger is not None:
                logger.log_step(forecast, fc)
    finally:
        if logger is not None:
            logger.close()
    return forecast


def _check_suffix(path: str | None, allowed: Sequence[str], what: str) -> None:
    if path is not None and Path(path).suffix.lower() not in allowed:
        raise UsageError(f"cannot write {what} to {path!r}: use a file name ending in "
                        + ", ".join(allowed))


def _check_output(path: str | None, what: str, *, directory: bool = False) -> None:
    """An output file (or, with `directory`, a folder created if missing) that cannot be
    written fails before the trace is loaded, not after minutes of work."""
    if path is None:
        return
    p = Path(path)
    if directory:
        if p.exists() and not p.is_dir():
            raise UserError(f"cannot write {what} to {path!r}: it is a file, not a folder; "
                            "name a folder (it is created if missing)")
        folder = p
        while not folder.exists() and folder != folder.parent:  # the part that exists already
            folder = folder.parent
    else:
        if p.is_dir():
            raise UserError(f"cannot write {what} to {path!r}: it is a folder; give a file name")
        folder = p.parent if str(p.parent) else Path(".")
        if not folder.exists():
            raise UserError(f"cannot write {what} to {path!r}: the folder {str(folder)!r} does "
                            "not exist; create it first or choose another path")
    if not folder.is_dir():
        raise UserError(f"cannot write {what} to {path!r}: {str(folder)!r} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {what} to {path!r}: no permission to write in "
                        f"{str(folder)!r}; choose a writable folder")


def _price_overrides(args: argparse.Namespace) -> dict[str, float]:
    overrides: dict[str, float] = {}
    for item in args.price or []:
        gpu, sep, value = item.partition("=")
        try:
            price = float(value)
        except ValueError:
            price = -1.0
        if not sep or not gpu.strip() or not math.isfinite(price) or price < 0:
            raise UsageError(f"--price {item!r}: write GPU=USD_PER_HOUR, e.g. --price A100=1.89")
        overrides[gpu.strip()] = price
    return overrides


def _compare(forecast: "Forecast", args: argparse.Namespace) -> Any:
    from habitat.analysis.compare import compare
    from habitat.analysis.pricing import PriceFileError

    try:
        return compare(forecast, forecast.targets, iterations=args.iterations, epochs=args.epochs,
                       steps_per_epoch=args.steps_per_epoch, prices=_price_overrides(args) or None,
                       price_file=args.prices, reserve_bytes=int(args.reserve_gib * (1 << 30)))
    except PriceFileError as exc:
        raise UserError(str(exc)) from None


def _check_run(args: argparse.Namespace) -> None:
    if args.epochs is not None and not args.steps_per_epoch:
        raise UsageError("--epochs needs --steps-per-epoch (how many steps one epoch takes)")
    if args.steps_per_epoch is not None and args.epochs is None:
        raise UsageError("--steps-per-epoch needs --epochs")
    if args.iterations <= 0 or (args.epochs is not None and args.epochs <= 0):
        raise UsageError("--iterations and --epochs must be > 0")
    if args.steps_per_epoch is not None and args.steps_per_epoch <= 0:
        raise UsageError("--steps-per-epoch must be > 0")
    if args.reserve_gib < 0:
        raise UsageError("--reserve-gib must be >= 0")
    _price_overrides(args)
    from habitat.analysis.pricing import PriceFileError, current_prices

    try:
        current_prices()  # a bad HABITAT_PRICES is reported before any work
    except PriceFileError as exc:
        raise UserError(str(exc)) from None


# ----- commands --------------------------------------------------------------------------
def _chosen_targets(args: argparse.Namespace) -> list[str] | None:
    """--target values, plus those of the deprecated --targets (with a warning)."""
    old = getattr(args, "targets_deprecated", None)
    if old:
        print(f"{PROG} {args.command}: warning: --targets is deprecated, use --target/-t "
              "(repeat or comma-separate)", file=sys.stderr)
    chosen = list(args.target or []) + list(old or [])
    return chosen or None


def cmd_devices(args: argparse.Namespace) -> int:
    from habitat.data.devices import devices, format_devices_table

    print(format_devices_table(devices()))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    _check_output(args.save, "the forecast")
    _check_output(args.log_dir, "TensorBoard logs", directory=True)
    targets = _resolve_targets(_chosen_targets(args), allow_all=False)  # before the long load
    if not targets:
        targets = _resolve_targets(_trace_targets(args.trace), allow_all=False)
    if not targets:
        raise UsageError("name the GPU(s) to forecast for: --target A100 (repeat or comma-separate "
                        "for several; `habitat devices` lists them)")
    # A saved forecast holds every step of the trace (not only the latest steps' detail).
    keep_all = bool(args.save)
    if args.log_dir:  # step by step, each logged to TensorBoard as it is forecast
        forecast = _forecast(_load_trace(args.trace), targets, args.trace, log_dir=args.log_dir,
                             keep_all=keep_all)
    else:
        forecast = _forecast_file(args.trace, targets, args.host_speed, keep_all=keep_all)
    if args.save:
        forecast.save(args.save)
        print(f"forecast saved to {args.save}: {len(forecast.steps)} step(s), trace and totals, "
              f"for {len(forecast.targets)} GPU(s)", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps({"targets": forecast.targets, "steps": [s.summary() for s in forecast.steps]},
                         indent=2))
    else:
        print(forecast)
        if args.log_dir:
            print(f"TensorBoard logs written to {args.log_dir}: tensorboard --logdir {args.log_dir}")
    return 0


def _cluster_args(args: argparse.Namespace, targets: list[str]) -> list[Any]:
    """--cluster 8xH100[:INTERCONNECT[:NETWORK]] (repeatable), or --world-size N for every target."""
    from habitat.analysis.cluster import Cluster

    specs: list[dict[str, Any]] = []
    for text in args.cluster or []:
        count, _, rest = text.partition("x")
        parts = rest.split(":")
        if not count.isdigit() or not parts[0]:
            raise UserError(f"--cluster {text!r}: write GPUSxGPU[:INTERCONNECT[:NETWORK]], e.g. 8xH100, "
                            "16xA100:nvlink:infiniband, 4xL4:pcie")
        specs.append({"gpu": parts[0], "world_size": int(count),
                      "interconnect": parts[1] if len(parts) > 1 and parts[1] else args.interconnect,
                      "network": parts[2] if len(parts) > 2 and parts[2] else args.network,
                      "gpus_per_node": args.gpus_per_node})
    if args.world_size is not None:
        specs += [{"gpu": t, "world_size": args.world_size, "interconnect": args.interconnect,
                   "network": args.network, "gpus_per_node": args.gpus_per_node} for t in targets]
    try:
        return [Cluster(**s) for s in specs]
    except (ValueError, KeyError) as exc:
        raise UserError(str(exc)) from None


def _compare_clusters(args: argparse.Namespace, clusters: list[Any]) -> int:
    from habitat.analysis.cluster_compare import compare_clusters

    gpus = sorted({c.gpu for c in clusters})
    forecast = _forecast_file(args.trace, gpus, args.host_speed)
    try:
        comparison = compare_clusters(forecast, clusters, args.parallel, iterations=args.iterations,
                                      epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
                                      prices=_price_overrides(args) or None)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    print(json.dumps(comparison.to_dict(), indent=2) if args.json else comparison)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    _check_run(args)
    _check_suffix(args.plot, (".png", ".svg", ".pdf"), "a plot")
    _check_output(args.plot, "a plot")
    targets = _resolve_targets(_chosen_targets(args), allow_all=True)  # before the long load
    if args.cluster or args.world_size is not None:
        if args.plot:
            raise UserError("--plot draws single GPUs; leave it out with --cluster/--world-size")
        return _compare_clusters(args, _cluster_args(args, targets if _chosen_targets(args) else []))
    if args.parallel or args.interconnect or args.network or args.gpus_per_node:
        raise UserError("--parallel, --interconnect, --network and --gpus-per-node describe clusters: "
                        "add --world-size N or --cluster 8xH100")
    forecast = _forecast_file(args.trace, targets, args.host_speed)
    comparison = _compare(forecast, args)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
    else:
        print(comparison)
    if args.plot:
        comparison.plot(args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from habitat.present.report import HTML_SUFFIXES, MARKDOWN_SUFFIXES, write_report

    _check_run(args)
    _check_suffix(args.output, HTML_SUFFIXES + MARKDOWN_SUFFIXES, "the report")
    _check_output(args.output, "the report")
    chosen = _chosen_targets(args)
    compared = _resolve_targets(chosen, allow_all=True)  # before the long load
    comparison = _compare(_forecast_file(args.trace, compared, args.host_speed), args)
    # The detailed forecast: the named GPUs, else the trace's, else the three fastest.
    targets = ((compared if chosen else [])
               or _resolve_targets(_trace_targets(args.trace), allow_all=False)
               or [r.gpu for r in comparison.rows[:3]])
    forecast = _forecast_file(args.trace, targets, args.host_speed)
    write_report(forecast, args.output, comparison)
    print(f"report written to {args.output}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    try:
        module = importlib.import_module("habitat.evaluate")
    except ImportError as exc:
        raise UserError(f"the evaluation tools are not available in this installation ({exc})") from None
    entry = getattr(module, "main", None)
    if entry is None:
        try:
            entry = getattr(importlib.import_module("habitat.evaluate.__main__"), "main", None)
        except ImportError:
            entry = None
    if entry is None:
        raise UserError("habitat.evaluate has no main(argv) entry point in this installation: "
                        "run `python -m habitat.evaluate --help` or update habitat")
    rest = list(args.args)
    code = entry(rest[1:] if rest[:1] == ["--"] else rest)
    return int(code or 0)


@contextlib.contextmanager
def _trace_from_stdin(args: argparse.Namespace) -> Iterator[None]:
    """TRACE given as ``-``: standard input, read once (within the input cap, decompressed
    when gzip) into a temporary file that every reading of the command uses, removed after."""
    if getattr(args, "trace", None) != "-":
        yield
        return
    from habitat.data.input_files import STDIN, read_input_bytes

    try:
        data = read_input_bytes(STDIN, "trace from standard input")
    except (OSError, ValueError) as exc:
        raise UserError(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="habitat-stdin-") as folder:
        path = os.path.join(folder, "trace.json")
        with open(path, "wb") as f:
            f.write(data)
        del data
        args.trace = path
        try:
            yield
        finally:
            args.trace = "-"


# ----- parser ----------------------------------------------------------------------------
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
            args.trace = _trace_argument(args.trace)
        _check_devices()
        with _trace_from_stdin(args):
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


if __name__ == "__main__":
    sys.exit(main())
