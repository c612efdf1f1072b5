"""A training step's trace at a batch size too large to run on a 2-core CPU, from traces of the
same step at small batch sizes: every number in the trace that changes with the batch (shapes,
strides, view sizes, offsets, a mean's divisor) is an affine function of it, so two small
batches fix it and a third checks it. The result is the trace the capture would have recorded
at the large batch (same ops, real shapes); anything that is not affine in the batch, or ops
that differ between the small batches, is an error, never a guess.

Host-side fields (timings, storage identities, the step's wall time) are not shapes: they are
taken from the largest traced batch, so a timeline built from the result sees that batch's
host cadence; the kernel-sum forecast reads shapes only.
"""
from __future__ import annotations

from typing import Any

#: Keys whose values are host measurements or identities, not functions of the batch.
HOST_KEYS = frozenset({"storage", "start_us", "wall_us", "overhead_us", "own_before_us", "hook_overhead_us",
                       "wall_ms", "syncs", "measured_peak_bytes", "host"})


class NotAffine(ValueError):
    """The traces differ in a way a batch size does not explain."""


def _affine(values: list[Any], batches: list[int], batch: int, where: str) -> Any:
    (b0, v0), (b1, v1) = (batches[0], values[0]), (batches[1], values[1])
    slope = (v1 - v0) / (b1 - b0)
    offset = v0 - slope * b0
    for b, v in zip(batches[2:], values[2:]):
        if abs(slope * b + offset - v) > 1e-9 * max(1.0, abs(v)):
            raise NotAffine(f"{where}: {dict(zip(batches, values))} is not affine in the batch")
    out = slope * batch + offset
    if all(isinstance(v, int) for v in values):
        if slope != int(slope) or offset != int(offset):
            raise NotAffine(f"{where}: {dict(zip(batches, values))} has no integer affine form")
        return int(round(out))
    return out


def _merge(values: list[Any], batches: list[int], batch: int, where: str) -> Any:
    first = values[0]
    if isinstance(first, dict):
        keys = list(first)
        if any(list(v) != keys for v in values[1:]):
            raise NotAffine(f"{where}: keys differ between batches")
        return {k: values[-1][k] if k in HOST_KEYS else _merge([v[k] for v in values], batches, batch, f"{where}.{k}")
                for k in keys}
    if isinstance(first, list):
        if any(not isinstance(v, list) or len(v) != len(first) for v in values[1:]):
            raise NotAffine(f"{where}: lengths differ between batches")
        return [_merge([v[i] for v in values], batches, batch, f"{where}[{i}]") for i in range(len(first))]
    if all(v == first and type(v) is type(first) for v in values[1:]):
        return first
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return _affine(values, batches, batch, where)
    raise NotAffine(f"{where}: {dict(zip(batches, values))} differs between batches")


def extrapolate(docs: dict[int, dict[str, Any]], batch: int) -> dict[str, Any]:
    """The trace document at `batch` from documents traced at three or more smaller batch
    sizes ({batch size: document}); raises NotAffine naming the first field that disagrees."""
    if len(docs) < 3:
        raise ValueError("extrapolate needs traces at three batch sizes: two fix each number, the third checks it")
    batches = sorted(docs)
    if batches[0] < 2:
        raise ValueError("trace at batch sizes of 2 or more: a batch of 1 has size-1 dimensions whose strides "
                         "and broadcasting differ from a larger batch's")
    out = _merge([docs[b] for b in batches], batches, batch, "trace")
    out["batch_scale"] = {"batch": batch, "traced_batches": batches}  # ignored by the engine
    return out


def differences(a: Any, b: Any, where: str = "trace") -> list[tuple[str, Any, Any]]:
    """(field, value in a, value in b) wherever two trace documents differ, host keys and the
    batch_scale note aside: how an extrapolated trace compares with one traced at its batch."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in [k for k in a if k not in HOST_KEYS and k != "batch_scale"]:
            out += differences(a[k], b[k], f"{where}.{k}") if k in b else [(f"{where}.{k}", a[k], None)]
        return out + [(f"{where}.{k}", None, b[k]) for k in b if k not in a and k not in HOST_KEYS]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [(where, a, b)]
