"""Which of predict_on's steps are recorded in detail, which are only fingerprinted, and which
are only timed: the steady-state schedule.

A detailed step records every op (and, on a GPU, its kernels) and is forecast in full; a
fingerprinted step hashes its ops' names, shapes and dtypes and reuses the forecast of the
detailed step with the same fingerprint; a timed step records nothing and reuses the forecast
of the latest fingerprint. Torch-free: the schedule sees fingerprints and wall times only.
Not thread-safe on its own: predict_on calls it under its lock, with the worker's queue.
"""
from __future__ import annotations

#: Detailed steps captured but not yet forecast: while this many wait for the worker, later
#: steps are recorded in steady state (fingerprint and wall time only), so the training
#: thread never waits for the worker.
MAX_PENDING_STEPS = 2
#: Steps recorded in full detail at the start of a run (the first ones differ: optimizer state
#: is created, caches warm up); later steps are detailed only when their fingerprint is new.
DEFAULT_DETAIL_STEPS = 2
#: Steady-state steps between two whose fingerprint is computed (see predict_on's
#: fingerprint_every); the others are only timed, with the capture key off their thread. A
#: fingerprinted step costs +12-18 % of a launch-bound step (benchmarks/overhead/steady_ab.py
#: --fingerprint-every 1, CPU proxies), so one in 20 keeps the amortised cost under 1 %.
DEFAULT_FINGERPRINT_EVERY = 20
#: TIME_CHANGE_STEPS timed steps in a row this far (relative, same direction) from their
#: fingerprint's usual time make the next step a fingerprinted one: a new batch size or an
#: eval step often shows in the step time first (not in a launch-bound step, whose time does
#: not follow shapes). The new time becomes the usual one at once, so a lasting change (also
#: a busier machine) costs one fingerprinted step, not one per step until it is forgotten.
TIME_CHANGE = 0.5
TIME_CHANGE_STEPS = 3
#: Detailed steps that try to catch a new steady-state fingerprint before it is given up.
WANTED_ATTEMPTS = 3
#: Distinct step fingerprints whose forecast is kept for reuse (e.g. train and eval steps).
MAX_FINGERPRINTS = 8


class StepSchedule:
    """The kind of each step ('detailed', 'fingerprinted' or 'timed') from the steps before it:
    see predict_on's detail_steps, detail_every and fingerprint_every."""

    def __init__(self, detail_steps: int = DEFAULT_DETAIL_STEPS, detail_every: int = 0,
                 fingerprint_every: int = DEFAULT_FINGERPRINT_EVERY) -> None:
        if detail_steps < 1:
            raise ValueError(f"detail_steps must be at least 1, got {detail_steps}")
        if detail_every < 0:
            raise ValueError(f"detail_every must be 0 (never) or more, got {detail_every}")
        if fingerprint_every < 1:
            raise ValueError(f"fingerprint_every must be at least 1, got {fingerprint_every}")
        self.detail_steps = int(detail_steps)
        self.detail_every = int(detail_every)
        self.fingerprint_every = int(fingerprint_every)
        self._last_fingerprint: int | None = None  # of the latest fingerprinted step
        self._last_fingerprinted = -1  # its index
        # Steps from one fingerprinted step to the next: 1 after a step whose fingerprint
        # differs from the one before (shapes changed, or train and eval steps alternate),
        # doubling while it repeats, up to fingerprint_every.
        self._fingerprint_interval = 1
        self._check_next = False  # timed steps' time changed: fingerprint the next one
        self._last_shift = 0  # the latest timed step: +1 / -1 off its usual time, 0 not
        self._shifts = 0  # timed steps in a row with that shift
        self._usual_ms: dict[int, float] = {}  # timed steps' time per fingerprint (moving)
        #: Steps begun per kind ('detailed', 'fingerprinted', 'timed'), for benchmarks.
        self.kind_counts = {"detailed": 0, "fingerprinted": 0, "timed": 0}
        # Fingerprints of steady steps not known in detail, with the detailed steps left to
        # catch them: while any is wanted, steps are recorded in detail.
        self._wanted: dict[int, int] = {}
        self._known: dict[int, None] = {}  # fingerprints captured in detail, oldest first

    def begin(self, n: int, detailed_backlog: int) -> str:
        """The kind of the step beginning now, counted in :attr:`kind_counts`: 'detailed',
        'fingerprinted' (steady state) or 'timed' (steady state, no capture). `n`: the steps
        that ended normally (a failed one takes no slot); `detailed_backlog`: the detailed
        steps still waiting for the worker."""
        kind = self._kind(n, detailed_backlog)
        self.kind_counts[kind] += 1
        return kind

    def _kind(self, n: int, detailed_backlog: int) -> str:
        wanted = (n < self.detail_steps or bool(self._wanted)
                  or (self.detail_every > 0 and n % self.detail_every == 0))
        # The worker is behind on detailed steps: record this one in steady state instead
        # (a later step is detailed once it caught up), never wait for it.
        if wanted and detailed_backlog < MAX_PENDING_STEPS:
            return "detailed"
        if (self._check_next or self._last_fingerprint is None
                or n - self._last_fingerprinted >= self._fingerprint_interval):
            return "fingerprinted"
        return "timed"

    def timed(self, wall_ms: float) -> int | None:
        """A timed step took `wall_ms`: the fingerprint whose forecast it reuses (the latest
        one), or None when that one is not known in detail (the step is measured, not
        forecast)."""
        fingerprint = self._last_fingerprint
        usual = self._usual_ms.get(fingerprint)  # type: ignore[arg-type]
        # Timed steps in a row off the usual time in the same direction: a change, not a
        # one-off (a busy machine, a garbage collection).
        shift = 0 if usual is None or abs(wall_ms / usual - 1) <= TIME_CHANGE else (
            1 if wall_ms > usual else -1)
        self._shifts = self._shifts + 1 if shift != 0 and shift == self._last_shift else 1
        self._last_shift = shift
        if shift != 0 and self._shifts >= TIME_CHANGE_STEPS:
            self._check_next = True
            # The new time is the usual one from now on: a lasting change is checked once.
            self._usual_ms[fingerprint] = wall_ms  # type: ignore[index]
            self._shifts = self._last_shift = 0
        else:
            self._usual_ms[fingerprint] = wall_ms if usual is None else 0.8 * usual + 0.2 * wall_ms  # type: ignore[index]
        return fingerprint if fingerprint in self._known else None

    def detailed(self, index: int, fingerprint: int) -> None:
        """Step `index` was recorded in detail with `fingerprint`: known from now on."""
        self._fingerprinted(index, fingerprint)
        self._known.pop(fingerprint, None)
        self._known[fingerprint] = None
        while len(self._known) > MAX_FINGERPRINTS:
            self._known.pop(next(iter(self._known)))
        if self._wanted.pop(fingerprint, None) is None:
            # Not the step that was wanted (e.g. train and eval steps alternate): try
            # again at the next step, a couple of times at most (shapes that never
            # repeat do not keep every step detailed).
            self._wanted = {fp: left - 1 for fp, left in self._wanted.items() if left > 1}

    def fingerprinted(self, index: int, fingerprint: int) -> bool:
        """Steady-state step `index` had `fingerprint`: whether a detailed step with it is
        known (its forecast is reused); if not, the next steps are detailed to catch it."""
        self._fingerprinted(index, fingerprint)
        if fingerprint in self._known:
            return True
        self._wanted[fingerprint] = WANTED_ATTEMPTS
        return False

    def _fingerprinted(self, index: int, fingerprint: int) -> None:
        self._fingerprint_interval = (
            min(2 * self._fingerprint_interval, self.fingerprint_every)
            if fingerprint == self._last_fingerprint else 1)
        self._last_fingerprint, self._last_fingerprinted = fingerprint, index
        self._check_next = False
