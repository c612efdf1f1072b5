"""One op's forecast on each target (:class:`OpForecast`, :class:`Prediction`), built from the
step's trace and the engine's per-op rows: all of a step's ops, or only those at some positions
(the top ops of a million-op step cost a few objects)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from habitat.data.devices import get_device
from habitat.data.op_rows import METHODS, OP_CLASSES, OpRows
from habitat.data.trace import tensor_args

SHAPE_BASED_METHODS = frozenset({"roofline", "learned_shape", "fallback"})


@dataclass(frozen=True)
class Prediction:
    """An op's forecast on one target: its whole time (children included), and its share:
    what it adds to the step total, each piece of work counted once (see csrc/include/habitat/predictor.h)."""

    time_us: float
    method: str
    share_us: float = 0.0
    share_method: str = ""

    @property
    def shape_based(self) -> bool:
        """True when the forecast came from the op's shapes alone (no measured kernels)."""
        return self.method in SHAPE_BASED_METHODS


@dataclass
class OpForecast:
    """One captured aten op with its predicted time on each target."""

    id: int
    name: str
    overload: str
    phase: str
    module_path: str
    autograd_node: str
    parent: int | None
    depth: int
    has_children: bool
    measured_us: float
    input_shapes: list[list[int]]
    dtypes: list[str]
    op_class: str | None
    flops: float
    bytes: float
    predictions: dict[str, Prediction]

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name

    def time_us(self, target: str) -> float:
        return self.predictions[canonical(target)].time_us

    def method(self, target: str) -> str:
        return self.predictions[canonical(target)].method

    def share_us(self, target: str) -> float:
        """What this op adds to the step's total on `target`."""
        return self.predictions[canonical(target)].share_us


def canonical(target: str) -> str:
    """The database name of `target` (an alias such as "A100" or a full name)."""
    return get_device(target).name


def _shapes_and_dtypes(op: dict[str, Any]) -> tuple[list[list[int]], list[str]]:
    shapes: list[list[int]] = []
    dtypes: list[str] = []
    for _, meta in tensor_args(op):
        shapes.append(list(meta.get("shape", [])))
        dtypes.append(meta.get("dtype", ""))
    return shapes, dtypes


def _op_forecast(op: dict[str, Any], op_class: str, flops: float, nbytes: float,
                 predictions: dict[str, Prediction]) -> OpForecast:
    """One op's OpForecast: its trace fields and its row's forecast."""
    shapes, dtypes = _shapes_and_dtypes(op)
    return OpForecast(
        id=op["id"], name=op["name"], overload=op.get("overload", ""),
        phase=op.get("phase", "other"), module_path=op.get("module_path", ""),
        autograd_node=op.get("autograd_node", ""), parent=op.get("parent"),
        depth=op.get("depth", 0), has_children=op.get("has_children", False),
        measured_us=op.get("wall_us", 0.0), input_shapes=shapes, dtypes=dtypes,
        op_class=op_class, flops=flops, bytes=nbytes, predictions=predictions)


def op_forecasts_at(step: dict[str, Any], rows: OpRows, indices: Sequence[int]) -> list[OpForecast]:
    """OpForecast objects of the ops at `indices` (row order is the step's op order) alone,
    read from the rows' numpy columns: the top ops of a million-op step cost a few objects."""
    a = rows.array
    targets = rows.targets
    ops = []
    for i in indices:
        row = a[i]
        ops.append(_op_forecast(
            step["ops"][i], OP_CLASSES[int(row["op_class"])], float(row["flops"]), float(row["bytes"]),
            {t: Prediction(float(row["time_us"][k]), METHODS[int(row["method"][k])],
                           float(row["share_us"][k]), METHODS[int(row["share_method"][k])])
             for k, t in enumerate(targets)}))
    return ops


def top_indices(table: OpRows, target: str, n: int) -> list[int]:
    """Positions of the `n` ops adding the most to the step's total on `target` (a name of
    ``table.targets``), ties in step order."""
    import numpy as np

    share = table.array["share_us"][:, table.targets.index(target)]
    counted = np.flatnonzero(share > 0)
    # A stable sort of the negated shares: equal shares keep step order, as sorted(reverse=True).
    return counted[np.argsort(-share[counted], kind="stable")][:max(0, n)].tolist()


def op_forecasts_from_rows(step: dict[str, Any], rows: OpRows) -> list[OpForecast]:
    """Every op of `step` as an OpForecast, with its row's forecasts (rows in op order)."""
    c = rows.columns()
    targets = rows.targets
    n = len(targets)
    return [_op_forecast(op, c["op_class"][i], c["flops"][i], c["bytes"][i],
                         {targets[t]: Prediction(c["time_us"][t][i], c["method"][t][i],
                                                 c["share_us"][t][i], c["share_method"][t][i])
                          for t in range(n)})
            for i, op in enumerate(step["ops"])]

