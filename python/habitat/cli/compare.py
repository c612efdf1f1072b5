"""``habitat compare``: every GPU (or cluster) ranked by the step as seen, cost and memory fit;
and the run length and prices it shares with ``habitat report``."""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING, Any

from habitat.cli import traces
from habitat.cli.errors import UsageError, UserError
from habitat.cli.outputs import check_output, check_suffix
from habitat.cli.targets import chosen_targets, resolve_targets

if TYPE_CHECKING:
    from habitat.data.forecast import Forecast


def price_overrides(args: argparse.Namespace) -> dict[str, float]:
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


def check_run(args: argparse.Namespace) -> None:
    """The run length, memory reserve and prices, checked before any work (exit code 2, or 1
    for a bad HABITAT_PRICES file)."""
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
    price_overrides(args)
    from habitat.analysis.pricing import PriceFileError, current_prices

    try:
        current_prices()  # a bad HABITAT_PRICES is reported before any work
    except PriceFileError as exc:
        raise UserError(str(exc)) from None


def compare_gpus(forecast: "Forecast", args: argparse.Namespace) -> Any:
    """The forecast's targets ranked for the run length and prices of `args`."""
    from habitat.analysis.compare import compare
    from habitat.analysis.pricing import PriceFileError

    try:
        return compare(forecast, forecast.targets, iterations=args.iterations, epochs=args.epochs,
                       steps_per_epoch=args.steps_per_epoch, prices=price_overrides(args) or None,
                       price_file=args.prices, reserve_bytes=int(args.reserve_gib * (1 << 30)))
    except PriceFileError as exc:
        raise UserError(str(exc)) from None


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
    forecast = traces.forecast_file(args.trace, gpus, args.host_speed)
    try:
        comparison = compare_clusters(forecast, clusters, args.parallel, iterations=args.iterations,
                                      epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
                                      prices=price_overrides(args) or None)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    print(json.dumps(comparison.to_dict(), indent=2) if args.json else comparison)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    check_run(args)
    check_suffix(args.plot, (".png", ".svg", ".pdf"), "a plot")
    check_output(args.plot, "a plot")
    targets = resolve_targets(chosen_targets(args), allow_all=True)  # before the long load
    if args.cluster or args.world_size is not None:
        if args.plot:
            raise UserError("--plot draws single GPUs; leave it out with --cluster/--world-size")
        return _compare_clusters(args, _cluster_args(args, targets if chosen_targets(args) else []))
    if args.parallel or args.interconnect or args.network or args.gpus_per_node:
        raise UserError("--parallel, --interconnect, --network and --gpus-per-node describe clusters: "
                        "add --world-size N or --cluster 8xH100")
    forecast = traces.forecast_file(args.trace, targets, args.host_speed)
    comparison = compare_gpus(forecast, args)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
    else:
        print(comparison)
    if args.plot:
        comparison.plot(args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0
