"""``habitat report``: the GPU comparison and a detailed forecast as one HTML or Markdown file."""
from __future__ import annotations

import argparse

from habitat.cli import traces
from habitat.cli.compare import check_run, compare_gpus
from habitat.cli.outputs import check_output, check_suffix
from habitat.cli.targets import chosen_targets, resolve_targets, trace_targets


def cmd_report(args: argparse.Namespace) -> int:
    from habitat.present.report import HTML_SUFFIXES, MARKDOWN_SUFFIXES, write_report

    check_run(args)
    check_suffix(args.output, HTML_SUFFIXES + MARKDOWN_SUFFIXES, "the report")
    check_output(args.output, "the report")
    chosen = chosen_targets(args)
    compared = resolve_targets(chosen, allow_all=True)  # before the long load
    comparison = compare_gpus(traces.forecast_file(args.trace, compared, args.host_speed), args)
    # The detailed forecast: the named GPUs, else the trace's, else the three fastest.
    targets = ((compared if chosen else [])
               or resolve_targets(trace_targets(args.trace), allow_all=False)
               or [r.gpu for r in comparison.rows[:3]])
    forecast = traces.forecast_file(args.trace, targets, args.host_speed)
    write_report(forecast, args.output, comparison)
    print(f"report written to {args.output}")
    return 0
