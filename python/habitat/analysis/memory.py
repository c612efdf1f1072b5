"""Peak device memory of a training step, and whether it fits on a target GPU.

On a GPU origin the capture records the caching allocator's peak for the step
(``measured_peak_bytes``, from ``torch.cuda.max_memory_allocated``); that figure is used when
present. Everywhere (and always, for the breakdown) the peak is also estimated from the trace
alone: every tensor names its storage, so a storage's size and lifetime follow from the ops
that produce and consume it.

Method (one step; its leaf ops in order, since composite ops' tensors are their sub-ops'):

- A storage first seen as an *input* existed before the step; one first seen as an *output*
  was created during it. It lives until its last use (there is no "free" event in a trace).
  Storage ids are StorageImpl addresses; the capture holds a weak reference to every storage
  a step sees, so within a captured step an address names one storage. (For other traces: an
  op output naming a known storage that is none of the op's inputs, so neither a view nor an
  in-place result, is a new storage at a recycled address.)
- Composite ops count too: their kernels may allocate results without a dispatcher call (a
  storage first seen as an input was made by the composite op that returned it) and read or
  update their arguments themselves (used at the op's first sub-op).
- **parameters**: pre-existing storages read in the forward pass and updated in place by the
  optimizer. **gradients**: storages written during the backward pass that the optimizer
  reads. **optimizer state**: other storages the optimizer updates in place that existed before
  the step or that it created with a factory op (``zeros_like``, ``clone`` ...: Adam's
  ``exp_avg`` on the first step). **inputs and buffers**: other pre-existing storages (the
  batch, running statistics, frozen weights).
- **activations**: every other storage created in the step (saved activations, temporaries,
  optimizer temporaries), live from creation to last use; reported as their peak.
- Gradients and state created in the step stay live to its end; persistent storages all along.
  The estimated peak is the largest live total over the step, plus the **workspace**.
- **workspace**: cuBLAS's recommended workspace when the step runs matrix products (4 MiB
  before Hopper, 32 MiB from compute capability 9.0; cuBLAS documentation,
  ``cublasSetWorkspace``). cuDNN convolution workspaces are not modelled.

Known limits: a storage's last use is not its release (the caching allocator frees it when the
last reference dies, possibly later), so long-lived references the trace cannot see are
missed; allocator rounding and fragmentation are not modelled; tensors without a storage id
count only for the op that makes them; ops dropped by the capture cap are missing. Fitting
adds a reserve for the CUDA context and allocator slack (:data:`DEFAULT_RESERVE_BYTES`, an
assumption, not a measurement).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from habitat import _engine
from habitat.data.devices import get_device
from habitat.data.engine import trace_document

GiB = 1 << 30
MiB = 1 << 20

#: Kept free on the target for the CUDA context (outside the allocator) and allocator slack.
#: An allowance, not a measured figure: set ``reserve_bytes`` when you know your setup.
DEFAULT_RESERVE_BYTES = 1 * GiB

#: cuBLAS's recommended workspace (cublasSetWorkspace): 32 MiB on Hopper and later, else 4 MiB.
CUBLAS_WORKSPACE_HOPPER = 32 * MiB
CUBLAS_WORKSPACE_DEFAULT = 4 * MiB

CATEGORIES = ("parameters", "gradients", "optimizer_state", "inputs", "activations", "workspace")


@dataclass
class MemoryEstimate:
    """Peak memory of one step, by category (bytes)."""

    parameters: int
    gradients: int
    optimizer_state: int
    inputs: int
    activations: int            # peak of live activations and temporaries
    live_peak: int              # largest live total over the step (all categories, no workspace)
    peak_op: str                # the op at which the live total peaks
    peak_phase: str
    uses_matmul: bool
    measured_peak_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    def workspace(self, target: str | None = None) -> int:
        """Library workspace on `target` (the cuBLAS workspace when the step multiplies matrices)."""
        if not self.uses_matmul:
            return 0
        if target is None:
            return CUBLAS_WORKSPACE_DEFAULT
        return CUBLAS_WORKSPACE_HOPPER if get_device(target).cc_major >= 9 else CUBLAS_WORKSPACE_DEFAULT

    def estimated_peak(self, target: str | None = None) -> int:
        return self.live_peak + self.workspace(target)

    def peak_bytes(self, target: str | None = None) -> int:
        """The measured allocator peak when the trace has one, else the estimate."""
        if self.measured_peak_bytes:
            return self.measured_peak_bytes
        return self.estimated_peak(target)

    @property
    def source(self) -> str:
        return "measured" if self.measured_peak_bytes else "estimated"

    def fits(self, target: str, reserve_bytes: int = DEFAULT_RESERVE_BYTES) -> tuple[bool, int]:
        """(fits, margin in bytes) of the step's peak on `target`'s memory, less `reserve_bytes`.

        A negative margin is the shortfall.
        """
        capacity = int(get_device(target).memory_gb * GiB)
        margin = capacity - reserve_bytes - self.peak_bytes(target)
        return margin >= 0, margin

    def breakdown(self, target: str | None = None) -> dict[str, int]:
        return {"parameters": self.parameters, "gradients": self.gradients,
                "optimizer_state": self.optimizer_state, "inputs": self.inputs,
                "activations": self.activations, "workspace": self.workspace(target)}

    def to_dict(self, target: str | None = None) -> dict[str, Any]:
        return {**self.breakdown(target), "estimated_peak_bytes": self.estimated_peak(target),
                "measured_peak_bytes": self.measured_peak_bytes,
                "peak_bytes": self.peak_bytes(target), "source": self.source,
                "peak_op": self.peak_op, "peak_phase": self.peak_phase, "notes": list(self.notes)}

    def __str__(self) -> str:
        parts = ", ".join(f"{k.replace('_', ' ')} {format_bytes(v)}" for k, v in self.breakdown().items())
        text = f"peak {format_bytes(self.peak_bytes())} ({self.source}); {parts}"
        if self.measured_peak_bytes:
            text += f"; estimated peak {format_bytes(self.estimated_peak())}"
        return text


def format_bytes(n: float) -> str:
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            return f"{sign}{n / size:.2f} {unit}"
    return f"{sign}{int(n)} B"


def _estimate(r: dict[str, Any]) -> MemoryEstimate:
    return MemoryEstimate(
        parameters=r["parameters"], gradients=r["gradients"], optimizer_state=r["optimizer_state"],
        inputs=r["inputs"], activations=r["activations"], live_peak=r["live_peak"],
        peak_op=r["peak_op"], peak_phase=r["peak_phase"], uses_matmul=r["uses_matmul"],
        measured_peak_bytes=r["measured_peak_bytes"] or None, notes=list(r["notes"]))


def estimate_captured_memory(capsule: Any) -> MemoryEstimate:
    """:func:`estimate_step_memory` of a step the engine holds (``StepForecast.captured``),
    without an object per op."""
    return _estimate(_engine.estimate_step_memory(capsule))


def step_memory(step: Any) -> MemoryEstimate | None:
    """The memory estimate of a :class:`~habitat.data.forecast.StepForecast`: from the
    engine's copy of the step when it holds one (no per-op decoding), else from its trace;
    None when the step's ops are no longer held."""
    capsule = getattr(step, "captured", None)
    if capsule is not None:
        return estimate_captured_memory(capsule)
    trace = step.trace
    return estimate_step_memory(trace) if trace is not None else None


def estimate_step_memory(step: dict[str, Any]) -> MemoryEstimate:
    """Estimates the peak memory of one trace step (a step dict of docs/trace-format.md).
    The method above runs in the engine (csrc/src/memory/step_memory.cpp); an invalid step
    raises TraceFormatError naming the field."""
    text = json.dumps(trace_document({"device": "cpu"}, [step]), separators=(",", ":"))
    return _estimate(_engine.estimate_step_memory_json(text))
