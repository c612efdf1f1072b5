"""Runs a test's worker on several threads at once and surfaces what they raised."""
from __future__ import annotations

import threading
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")


def run_in_threads(worker: Callable[[T], None], args: Iterable[T]) -> None:
    """Calls worker(a) for each a on its own thread, waits for all, and re-raises the first
    exception any of them raised (a thread's exception would otherwise only be printed)."""
    errors: list[BaseException] = []

    def guarded(a: T) -> None:
        try:
            worker(a)
        except BaseException as e:  # re-raised on the test's thread below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(a,)) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
