"""A progress bar on stderr for long command-line work: tqdm when installed, else a plain one.

Drawn only when stderr is a terminal, so logs and pipes stay clean.
"""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


#: Work shorter than this shows no bar or status line.
DELAY_S = 1.0


@contextmanager
def status(desc: str, enabled: bool | None = None, delay: float = DELAY_S) -> Iterator[None]:
    """A one-line status on stderr for one long call (loading a file): ``desc ...`` appears
    once the work has taken `delay` seconds, then ``done in N s``. Silent for quick work and
    when stderr is not a terminal (`enabled=None`)."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield
        return
    start = time.monotonic()
    shown = threading.Event()

    def show() -> None:
        sys.stderr.write(f"{desc} ...")
        sys.stderr.flush()
        shown.set()

    timer = threading.Timer(delay, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if shown.is_set():
            sys.stderr.write(f" done in {time.monotonic() - start:.1f} s\n")
            sys.stderr.flush()


def progress(items: Iterable[T], total: int | None = None, desc: str = "",
             enabled: bool | None = None, delay: float = DELAY_S) -> Iterator[T]:
    """Yields `items`, drawing a bar on stderr once the work has taken `delay` seconds;
    `enabled=None` draws only on a terminal."""
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
        yield from _plain(items, total, desc, delay=delay)
        return
    yield from tqdm(items, total=total, desc=desc, file=sys.stderr, leave=False, delay=delay)


def _plain(items: Iterable[T], total: int | None, desc: str, width: int = 30,
           delay: float = 0.0) -> Iterator[T]:
    start = time.monotonic()
    last = 0.0
    drawn = False

    def draw(done: int, final: bool = False) -> None:
        nonlocal drawn
        if time.monotonic() - start < delay and not drawn:
            return
        drawn = True
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
