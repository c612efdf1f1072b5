"""The collectives a captured step ran (c10d ops the capture saw through the dispatcher).

``torch.distributed`` calls reach the dispatcher as ``c10d::allreduce_``,
``c10d::_allgather_base_``, ``c10d::reduce_scatter_tensor_coalesced_``, ``c10d::send`` and so on
(DDP's reducer and FSDP call the same ops), so the capture records them like any aten op: their
tensors (sizes, dtypes), the process group's size and this rank (an argument recorded as
``ProcessGroup(size=4, rank=1)``), the phase and autograd node they ran in. This module turns
them into :class:`CapturedCollective` rows with nccl-tests' size convention and the compute
that could overlap them: the ops issued after the collective in the same phase (an async
collective on a communication stream runs alongside them).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from habitat import _engine

_GROUP = re.compile(r"ProcessGroup\(size=(\d+), rank=(\d+)\)")
#: Bytes per element of a tensor dtype (torch names).
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
             "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
             "float8_e4m3fn": 1, "float8_e5m2": 1}


@dataclass
class CapturedCollective:
    op_id: int
    op: str                  # e.g. "c10d::allreduce_"
    kind: str                # all_reduce, all_gather, reduce_scatter, broadcast, reduce, send_recv, all_to_all
    bytes: int               # nccl-tests' size: the buffer, all_gather's output, reduce_scatter's input
    dtypes: list[str]
    tensors: int             # tensors in the call (buckets coalesce many gradients into one)
    group_size: int | None
    rank: int | None
    phase: str
    autograd_node: str
    overlap_ops: int         # ops issued after it in the same phase
    overlap_us: float        # their measured time on the origin (what could run alongside it)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _tensor_bytes(meta: dict[str, Any]) -> int:
    n = 1
    for d in meta.get("shape", []):
        n *= int(d)
    return n * ITEMSIZE.get(meta.get("dtype", ""), 4)


def _group(op: dict[str, Any]) -> tuple[int | None, int | None]:
    for arg in op.get("args", []):
        m = _GROUP.fullmatch(str(arg.get("other", "")))
        if m:
            return int(m.group(1)), int(m.group(2))
    return None, None


def _size(kind: str, op: dict[str, Any], group_size: int | None) -> tuple[int, list[str], int]:
    """(nccl-tests size, dtypes, tensor count) of one c10d op."""
    per_arg: list[tuple[int, int]] = []  # (bytes, tensors) per tensor argument, in schema order
    dtypes: list[str] = []
    nested = False  # a Tensor[][] argument (allgather_'s output, reduce_scatter_'s input)
    for arg in op.get("args", []):
        ts = arg.get("tensors") or ([arg["tensor"]] if "tensor" in arg else [])
        if ts:
            per_arg.append((sum(_tensor_bytes(t) for t in ts), len(ts)))
            dtypes += [t.get("dtype", "") for t in ts]
        elif str(arg.get("other", "")).startswith("Tensor[][]") or "List[List[Tensor]]" in str(arg.get("other", "")):
            nested = True
    if not per_arg:
        return 0, [], 0
    biggest = max(b for b, _ in per_arg)
    tensors = max(n for _, n in per_arg)
    if nested and kind in ("all_gather", "reduce_scatter") and group_size:
        biggest = per_arg[0][0] * group_size  # only the shard side was a flat tensor list
    return biggest, sorted(set(dtypes)), tensors


def captured_collectives(step: dict[str, Any]) -> list[CapturedCollective]:
    """The c10d collectives of a captured step (a trace step dict), in order."""
    ops = step.get("ops", [])
    out: list[CapturedCollective] = []
    for i, op in enumerate(ops):
        name = op.get("name", "")
        if not name.startswith("c10d::"):
            continue
        kind = _engine.collective_name(name)
        if kind is None:
            continue  # barrier, monitored_barrier: synchronisation, no data
        size, rank = _group(op)
        nbytes, dtypes, tensors = _size(kind, op, size)
        phase = op.get("phase", "other")
        later = [o for o in ops[i + 1:] if o.get("phase", "other") == phase
                 and not o.get("name", "").startswith("c10d::") and o.get("depth", 0) == 0]
        out.append(CapturedCollective(
            op_id=int(op.get("id", i)), op=name, kind=kind, bytes=int(nbytes), dtypes=dtypes,
            tensors=tensors, group_size=size, rank=rank, phase=phase,
            autograd_node=op.get("autograd_node", ""), overlap_ops=len(later),
            overlap_us=float(sum(o.get("wall_us", 0.0) for o in later))))
    return out
