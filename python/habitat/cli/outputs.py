"""Output files and folders, checked before any work so that a bad path fails at once."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from habitat.cli.errors import UsageError, UserError


def check_suffix(path: str | None, allowed: Sequence[str], what: str) -> None:
    if path is not None and Path(path).suffix.lower() not in allowed:
        raise UsageError(f"cannot write {what} to {path!r}: use a file name ending in "
                        + ", ".join(allowed))


def check_output(path: str | None, what: str, *, directory: bool = False) -> None:
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
