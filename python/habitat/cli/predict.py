"""``habitat devices`` and ``habitat predict``: the GPUs known, and a trace forecast for some."""
from __future__ import annotations

import argparse
import json
import sys

from habitat.cli import traces
from habitat.cli.errors import UsageError
from habitat.cli.outputs import check_output
from habitat.cli.targets import chosen_targets, resolve_targets, trace_targets


def cmd_devices(args: argparse.Namespace) -> int:
    from habitat.data.devices import devices, format_devices_table

    print(format_devices_table(devices()))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    check_output(args.save, "the forecast")
    check_output(args.log_dir, "TensorBoard logs", directory=True)
    targets = resolve_targets(chosen_targets(args), allow_all=False)  # before the long load
    if not targets:
        targets = resolve_targets(trace_targets(args.trace), allow_all=False)
    if not targets:
        raise UsageError("name the GPU(s) to forecast for: --target A100 (repeat or comma-separate "
                        "for several; `habitat devices` lists them)")
    # A saved forecast holds every step of the trace (not only the latest steps' detail).
    keep_all = bool(args.save)
    if args.log_dir:  # step by step, each logged to TensorBoard as it is forecast
        forecast = traces.forecast_steps(traces.read_trace(args.trace), targets, args.trace,
                                         log_dir=args.log_dir, keep_all=keep_all)
    else:
        forecast = traces.forecast_file(args.trace, targets, args.host_speed, keep_all=keep_all)
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
