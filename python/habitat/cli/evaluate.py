"""``habitat evaluate ...``: hands every argument to ``habitat.evaluate``'s own command line."""
from __future__ import annotations

import argparse
import importlib

from habitat.cli.errors import UserError


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
