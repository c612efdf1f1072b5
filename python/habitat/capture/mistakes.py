"""Warnings for the common mistakes in using ``predict_on``, said once, with the fix.

- *A forward-only step*: the loss computed inside the ``with`` block and ``loss.backward()``
  and ``opt.step()`` after it. The forecast then covers the forward pass only. Told from the
  outermost module's output: it carries an autograd graph (the forward ran with gradients on)
  and no gradient reached it before the block ended (:mod:`habitat.capture.modules` watches
  it during detailed steps).
- *A predictor per step*: ``with habitat.predict_on(...)`` inside the training loop. Each new
  predictor records its steps in full (the costly detailed capture) and forecasts are not
  combined across them. Told from three predictors in a row that each ran one step of the same
  work (targets and fingerprint) as the one before, each ending within about a step's time of
  the one before (a loop, not separate runs of a notebook cell).
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Sequence

#: Predictors in a row, each running one step of the same work, before the warning.
FRESH_PREDICTORS = 3
#: The most time between the ends of two such steps, beyond twice the step's own time, for
#: them to count as one loop's.
LOOP_GAP_S = 0.5

_serials = itertools.count()
_lock = threading.Lock()


class HabitatUsageWarning(UserWarning):
    """Habitat is used in a way that likely forecasts something else than meant (the training
    step itself is not affected); the message says what to change."""


def new_serial() -> int:
    """A number for each predictor (ids of collected objects are reused)."""
    return next(_serials)


def forward_only(index: int) -> str:
    return (f"habitat: step {index} ran a forward pass that builds an autograd graph but no "
            "backward pass inside the `with` block, so its forecast covers the forward pass "
            "only. To forecast the training step, put loss.backward() and optimizer.step() "
            "inside the block; to forecast inference, run the forward under torch.no_grad().")


class _FreshPredictors:
    """Steps of successive predictors: which ran last, how many steps, on what work."""

    def __init__(self) -> None:
        self.serial = -1
        self.steps = 0
        self.work: tuple[tuple[str, ...], int] | None = None
        self.in_a_row = 0
        self.ended = 0.0
        self.warned = False

    def step_ended(self, serial: int, targets: Sequence[str], fingerprint: int,
                   wall_ms: float) -> str | None:
        """Notes a recorded step of predictor `serial` (of `wall_ms`); the warning's text the
        first time FRESH_PREDICTORS predictors in a row each ran one step of the same work."""
        now = time.monotonic()
        with _lock:
            ended, self.ended = self.ended, now
            if serial == self.serial:
                self.steps += 1
                self.in_a_row = 0
                return None
            work = (tuple(targets), fingerprint)
            same = (self.steps == 1 and work == self.work
                    and now - ended <= 2 * wall_ms / 1e3 + LOOP_GAP_S)
            self.in_a_row = self.in_a_row + 1 if same else 1
            self.serial, self.steps, self.work = serial, 1, work
            if self.in_a_row < FRESH_PREDICTORS or self.warned:
                return None
            self.warned = True
        return (f"habitat: {self.in_a_row} predict_on(...) objects in a row each ran one step of "
                "the same work: a new predictor records its steps in full detail (the costly "
                "capture) and forecasts each on its own. Create one before the training loop and "
                "reuse it: `predictor = habitat.predict_on([...])`, then `with predictor as "
                "forecast:` around each step, and `predictor.close()` after the loop.")


fresh_predictors = _FreshPredictors()
