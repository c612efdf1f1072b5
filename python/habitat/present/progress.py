"""A progress bar on stderr for long command-line work: tqdm when installed, else a plain one.

Drawn only when stderr is a terminal, so logs and pipes stay clean.
"""
from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], total: int | None = None, desc: str = "",
             enabled: bool | None = None) -> Iterator[T]:
    """Yields `items`, drawing a bar on stderr; `enabled=None` draws only on a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield from items
        return
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    try:
        from tqdm import tqdm
    except ImportError:
        yield from _plain(items, total, desc)
        return
    yield from tqdm(items, total=total, desc=desc, file=sys.stderr, leave=False)


def _plain(items: Iterable[T], total: int | None, desc: str, width: int = 30) -> Iterator[T]:
    start = time.monotonic()
    last = 0.0

    def draw(done: int, final: bool = False) -> None:
        elapsed = time.monotonic() - start
        if total:
            filled = int(width * done / total)
            bar = "#" * filled + "-" * (width - filled)
            text = f"\r{desc} [{bar}] {done}/{total} {elapsed:.1f}s"
        else:
            text = f"\r{desc} {done} {elapsed:.1f}s"
        sys.stderr.write(text + ("\n" if final else ""))
        sys.stderr.flush()

    done = 0
    draw(0)
    for item in items:
        yield item
        done += 1
        now = time.monotonic()
        if now - last > 0.1:
            draw(done)
            last = now
    draw(done, final=True)
