"""The GPUs a command forecasts for: ``--target/-t`` (repeated or comma-separated, ``all``),
the deprecated ``--targets``, and the targets a saved forecast names."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from habitat.cli.errors import PROG, UserError
from habitat.cli.traces import check_trace_path


def check_devices() -> None:
    """A broken HABITAT_DEVICES file is a user error of every command, reported first."""
    from habitat.data.devices import check_devices as check_database

    try:
        check_database()
    except ValueError as exc:
        raise UserError(str(exc)) from None


def split_names(values: Sequence[str] | None) -> list[str]:
    names: list[str] = []
    for value in values or []:
        names.extend(v.strip() for v in value.split(",") if v.strip())
    return names


def resolve_targets(values: Sequence[str] | None, allow_all: bool) -> list[str]:
    """GPU names (repeated and/or comma-separated) to canonical names; ``all`` is every known
    GPU, and so is no name at all where `allow_all` (compare, report)."""
    from habitat.data.devices import devices, get_device

    names = split_names(values)
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


def chosen_targets(args: argparse.Namespace) -> list[str] | None:
    """--target values, plus those of the deprecated --targets (with a warning)."""
    old = getattr(args, "targets_deprecated", None)
    if old:
        print(f"{PROG} {args.command}: warning: --targets is deprecated, use --target/-t "
              "(repeat or comma-separate)", file=sys.stderr)
    chosen = list(args.target or []) + list(old or [])
    return chosen or None


def trace_targets(path: str) -> list[str]:
    """The targets a saved forecast names ("forecast": {"targets": [...]}), if any: the
    forecast section is the document's last key, so only the end of the file is read (a
    whole-file read only when the section is not found there). A damaged file is reported
    here, not taken for one that names no targets."""
    from habitat.data.forecast import saved_targets_of_file

    check_trace_path(path)
    try:
        return saved_targets_of_file(path) or []
    except RecursionError:
        raise UserError(f"cannot read trace {path!r}: its JSON nests too deeply (a damaged or "
                        "hostile file)") from None
    except (OSError, ValueError) as exc:
        message = str(exc)
        raise UserError(message if path in message else f"cannot read trace {path!r}: {message}") from None
