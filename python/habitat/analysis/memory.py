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

import bisect

from dataclasses import dataclass, field
from typing import Any

from habitat.data.devices import get_device
from habitat.data.trace import tensor_args

GiB = 1 << 30
MiB = 1 << 20

#: Kept free on the target for the CUDA context (outside the allocator) and allocator slack.
#: An allowance, not a measured figure: set ``reserve_bytes`` when you know your setup.
DEFAULT_RESERVE_BYTES = 1 * GiB

#: cuBLAS's recommended workspace (cublasSetWorkspace): 32 MiB on Hopper and later, else 4 MiB.
CUBLAS_WORKSPACE_HOPPER = 32 * MiB
CUBLAS_WORKSPACE_DEFAULT = 4 * MiB

DTYPE_BYTES = {
    "float64": 8, "double": 8, "float32": 4, "float": 4, "float16": 2, "half": 2,
    "bfloat16": 2, "complex128": 16, "complex64": 8, "complex32": 4,
    "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "short": 2, "int8": 1,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1, "qint8": 1, "quint8": 1, "qint32": 4,
}

# Ops that make a new tensor without computing it from data: how optimizers create state.
FACTORY_OPS = frozenset({
    "zeros", "zeros_like", "empty", "empty_like", "empty_strided", "full", "full_like",
    "ones", "ones_like", "scalar_tensor", "lift_fresh", "lift_fresh_copy", "clone", "new_zeros",
    "new_empty", "new_full", "new_ones", "_to_copy", "tensor",
})

# Fused optimizer kernels update these list arguments in place besides "self".
FUSED_STATE_ARGS = frozenset({"exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs",
                              "momentum_buffer_list", "state_sums"})

MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation",
                        "addbmm", "_scaled_mm", "_int_mm", "addmv", "mv"})

CATEGORIES = ("parameters", "gradients", "optimizer_state", "inputs", "activations", "workspace")


def _base_name(name: str) -> str:
    return name.split("::", 1)[-1]


def _in_place(op: dict[str, Any]) -> bool:
    base = _base_name(op["name"])
    return base.endswith("_") and not base.endswith("__")


def _storage_bytes(meta: dict[str, Any]) -> int:
    size = DTYPE_BYTES.get(meta.get("dtype", ""), 0)
    shape = meta.get("shape", [])
    if any(d == 0 for d in shape):
        return 0
    strides = meta.get("strides")
    if strides is None:  # the trace omits row-major strides
        extent = 1
        for d in shape:
            extent *= d
    else:
        extent = 1 + sum((d - 1) * abs(s) for d, s in zip(shape, strides))
    return (meta.get("storage_offset", 0) + extent) * size


@dataclass
class _Storage:
    nbytes: int
    first: int
    last: int
    created: bool            # first seen as an output of an op of this step
    last_id: int = -1        # id of the last op that used it
    created_by: str = ""
    created_phase: str = ""
    read_in: set[str] = field(default_factory=set)     # phases whose ops read it
    mutated_in: set[str] = field(default_factory=set)  # phases whose ops updated it in place
    produced_in: set[str] = field(default_factory=set)  # phases whose ops output it


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


def _device_filter(ops: list[dict[str, Any]]) -> str | None:
    """On a GPU capture only CUDA tensors occupy device memory; on a CPU capture all count."""
    for op in ops:
        metas = [m for _, m in tensor_args(op)] + list(op.get("outputs", []))
        if any(str(m.get("device", "")).startswith("cuda") for m in metas):
            return "cuda"
    return None


def _mutable_args(op: dict[str, Any]) -> set[str]:
    """Names of the arguments `op` updates in place (none for a functional op)."""
    if op.get("overload", "").startswith("out"):
        return {"out"}
    if not _in_place(op):
        return set()
    return {"self"} | (FUSED_STATE_ARGS if _base_name(op["name"]).startswith("_fused_") else set())


def estimate_captured_memory(capsule: Any) -> MemoryEstimate:
    """:func:`estimate_step_memory` of a step the engine holds (``StepForecast.captured``),
    computed by the engine (csrc/src/memory/step_memory.cpp, the same method and numbers)
    without an object per op."""
    from habitat import _engine

    r = _engine.estimate_step_memory(capsule)
    return MemoryEstimate(
        parameters=r["parameters"], gradients=r["gradients"], optimizer_state=r["optimizer_state"],
        inputs=r["inputs"], activations=r["activations"], live_peak=r["live_peak"],
        peak_op=r["peak_op"], peak_phase=r["peak_phase"], uses_matmul=r["uses_matmul"],
        measured_peak_bytes=r["measured_peak_bytes"] or None, notes=list(r["notes"]))


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
    """Estimates the peak memory of one trace step (a step dict of docs/trace-format.md)."""
    all_ops: list[dict[str, Any]] = list(step.get("ops", []))
    # Leaf ops allocate; a composite op's outputs are its sub-ops' (or views of its inputs).
    ops = [op for op in all_ops if not op.get("has_children", False)]
    notes: list[str] = []
    only = _device_filter(ops)
    storages: list[_Storage] = []
    current: dict[int, int] = {}     # storage id -> index in `storages` of its live generation
    anonymous = [0] * (len(ops) + 1)  # bytes of outputs without a storage id, by position
    uses_matmul = False
    unknown_dtypes: set[str] = set()

    def counted(meta: dict[str, Any]) -> bool:
        if meta.get("defined", True) is False or str(meta.get("device", "")) == "meta":
            return False
        if meta.get("dtype", "") not in DTYPE_BYTES:
            unknown_dtypes.add(meta.get("dtype", "") or "(none)")
        return only is None or str(meta.get("device", "")).startswith(only)

    made_by = _made_by_composites(all_ops)
    # Their ids, to bisect where they increase (captured steps): long lists of makers of one
    # storage (a layer run many times) made _maker quadratic.
    maker_ids = {sid: [m["id"] for m in ms] for sid, ms in made_by.items()}
    maker_ids = {sid: ids for sid, ids in maker_ids.items()
                 if all(a <= b for a, b in zip(ids, ids[1:]))}
    by_id = {op["id"]: op for op in all_ops}
    applied: set[int] = set()  # composite ops whose in-place updates are accounted for
    for i, op in enumerate(ops):
        phase = op.get("phase", "other")
        uses_matmul = uses_matmul or _base_name(op["name"]) in MATMUL_OPS
        mutable = _mutable_args(op)
        inputs = [(name, meta, mutable) for name, meta in tensor_args(op) if counted(meta)]
        input_ids = {meta.get("storage", 0) for _, meta, _ in inputs}
        # A composite op's kernel may read or update its arguments itself, beside its sub-ops
        # (CPU mkldnn convolution reads its weight, add_ of a step counter of another dtype
        # updates it): no leaf shows that, so its arguments are used at its first leaf.
        ancestor = op
        started: list[dict[str, Any]] = []  # composite ops whose first leaf this is
        while ancestor.get("parent") is not None and ancestor["parent"] in by_id:
            ancestor = by_id[ancestor["parent"]]
            if ancestor["id"] in applied:
                break
            applied.add(ancestor["id"])
            started.append(ancestor)
            outer_mutable = _mutable_args(ancestor)
            inputs += [(name, meta, outer_mutable) for name, meta in tensor_args(ancestor)
                       if counted(meta)]
        for name, meta, mutable_here in inputs:
            sid = meta.get("storage", 0)
            if not sid:
                continue
            # Kernels allocate results without a dispatcher call (CPU addmm's output is first
            # seen as the copy_ destination of the bias inside it; mkldnn convolution's not at
            # all): a composite op that returned this storage after its last known use made a
            # new one at that address.
            maker = _maker(op, sid, made_by, maker_ids)
            if sid in current and maker is not None and maker["id"] > storages[current[sid]].last_id:
                del current[sid]
            if sid not in current:  # existed before the step, unless a composite made it
                current[sid] = len(storages)
                storages.append(_Storage(
                    _storage_bytes(meta), i, i, created=maker is not None,
                    created_by=_base_name(maker["name"]) if maker else "",
                    created_phase=maker.get("phase", "other") if maker else ""))
            s = storages[current[sid]]
            s.nbytes = max(s.nbytes, _storage_bytes(meta))
            s.last, s.last_id = i, op["id"]
            s.read_in.add(phase)
            if name in mutable_here:
                s.mutated_in.add(phase)
        # A composite op's results exist from its start: its first leaf. (A storage it made
        # could otherwise seem to start at its first use, after the composite's inputs died.)
        # (Those the composite made: made_by's test, by the composite's own inputs, since
        # scanning made_by's list of one storage per output was quadratic on long steps.)
        outputs = list(op.get("outputs", [])) + [
            meta for ancestor in started if ancestor.get("has_children", False)
            for made in [_made_storages(ancestor)]
            for meta in ancestor.get("outputs", []) if meta.get("storage", 0) in made]
        made_here: set[int] = set()  # nested composites return the same storage: one storage
        for meta in outputs:
            if not counted(meta):
                continue
            sid = meta.get("storage", 0)
            if not sid:
                anonymous[i] += _storage_bytes(meta)
                continue
            if sid in made_here:
                continue
            made_here.add(sid)
            if sid in current and sid not in input_ids:
                # Storage ids are addresses: a new storage at a freed one's address. The old
                # storage ended at its last use.
                del current[sid]
            if sid not in current:
                current[sid] = len(storages)
                # Named after the call that made it (zeros_like, not the empty_strided inside):
                # a factory call makes state, a computation a temporary.
                storages.append(_Storage(_storage_bytes(meta), i, i, created=True,
                                         created_by=_base_name(_root(op, by_id)["name"]),
                                         created_phase=phase))
            s = storages[current[sid]]
            s.nbytes = max(s.nbytes, _storage_bytes(meta))
            s.last, s.last_id = i, op["id"]
            s.produced_in.add(phase)

    if ops and not any(op.get("phase") == "optimizer" for op in ops):
        notes.append("no optimizer step in this step: parameters are counted with inputs")
    if step.get("dropped_ops"):
        notes.append(f"{step['dropped_ops']} op(s) were not recorded (capture cap): "
                     "the estimate misses their tensors")
    if unknown_dtypes:
        notes.append("tensors of unknown dtype counted as 0 bytes: " + ", ".join(sorted(unknown_dtypes)))

    n = len(ops)
    totals = {k: 0 for k in CATEGORIES}
    delta_live = [0] * (n + 1)     # all categories
    delta_act = [0] * (n + 1)      # activations only
    for s in storages:
        kind = _category(s)
        if kind == "activations":
            for delta in (delta_act, delta_live):
                delta[s.first] += s.nbytes
                delta[s.last + 1] -= s.nbytes
        else:
            totals[kind] += s.nbytes
            # pre-existing storages live all step; ones made in the step live from creation on
            delta_live[s.first if s.created else 0] += s.nbytes
    for at, nbytes in enumerate(anonymous[:n]):
        for delta in (delta_act, delta_live):
            delta[at] += nbytes
            delta[at + 1] -= nbytes

    live = act = peak = act_peak = 0
    peak_at = 0
    for t in range(n):
        live += delta_live[t]
        act += delta_act[t]
        if live > peak:
            peak, peak_at = live, t
        act_peak = max(act_peak, act)

    measured = int(step.get("measured_peak_bytes", 0) or 0) or None
    return MemoryEstimate(
        parameters=totals["parameters"], gradients=totals["gradients"],
        optimizer_state=totals["optimizer_state"], inputs=totals["inputs"], activations=act_peak,
        live_peak=peak, peak_op=ops[peak_at]["name"] if ops else "",
        peak_phase=ops[peak_at].get("phase", "other") if ops else "",
        uses_matmul=uses_matmul, measured_peak_bytes=measured, notes=notes,
    )


def _made_storages(op: dict[str, Any]) -> set[int]:
    """Storage ids among `op`'s outputs that are none of its inputs (what a composite made)."""
    inputs = {meta.get("storage", 0) for _, meta in tensor_args(op)}
    return {sid for meta in op.get("outputs", []) if (sid := meta.get("storage", 0)) and sid not in inputs}


def _made_by_composites(all_ops: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Per storage id, the composite ops (in order) that returned it without receiving it:
    made inside them, though no sub-op may show it (kernels allocate results directly)."""
    made: dict[int, list[dict[str, Any]]] = {}
    for op in all_ops:
        if not op.get("has_children"):
            continue
        inputs = {meta.get("storage", 0) for _, meta in tensor_args(op)}
        for meta in op.get("outputs", []):
            sid = meta.get("storage", 0)
            if sid and sid not in inputs:
                made.setdefault(sid, []).append(op)
    return made


def _root(op: dict[str, Any], by_id: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The op user code (or autograd) called that led to `op`."""
    while op.get("parent") is not None and op["parent"] in by_id:
        op = by_id[op["parent"]]
    return op


def _maker(op: dict[str, Any], sid: int, made_by: dict[int, list[dict[str, Any]]],
           maker_ids: dict[int, list[int]] | None = None) -> dict[str, Any] | None:
    """The composite op that made storage `sid` most recently before `op` started
    (`maker_ids`: the ids of made_by's lists whose ids increase, searched by bisection)."""
    op_id = op["id"]
    ids = maker_ids.get(sid) if maker_ids is not None else None
    if ids is not None:
        at = bisect.bisect_right(ids, op_id)
        return made_by[sid][at - 1] if at else None
    for m in reversed(made_by.get(sid, ())):  # the last one at or before `op`, found from the end
        if m["id"] <= op_id:
            return m
    return None


def _category(s: _Storage) -> str:
    if not s.created and "optimizer" in s.mutated_in and "forward" in s.read_in:
        return "parameters"
    written_by_backward = (s.created and s.created_phase == "backward") or "backward" in s.mutated_in
    if written_by_backward and "optimizer" in s.read_in:
        return "gradients"
    if "optimizer" in s.mutated_in and (not s.created or s.created_by in FACTORY_OPS):
        return "optimizer_state"
    return "activations" if s.created else "inputs"
