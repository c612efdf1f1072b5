"""The engine's per-op forecasts of one step as columns, not one Python object per op.

The engine returns a step's per-op detail as fixed-size binary rows (csrc/include/habitat/
forecast_rows.h); :class:`OpRows` reads them as a numpy structured array, so a step of a
million ops costs a few bytes per op and target until someone asks for more.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from habitat import _engine

if TYPE_CHECKING:
    import numpy as np

#: Names of the method, op class and precision codes in the rows, in code order.
METHODS: tuple[str, ...] = tuple(_engine.OP_ROW_METHODS)
OP_CLASSES: tuple[str, ...] = tuple(_engine.OP_ROW_CLASSES)
PRECISIONS: tuple[str, ...] = tuple(_engine.OP_ROW_PRECISIONS)


def row_dtype(n_targets: int) -> "np.dtype":
    """The numpy dtype of one row for `n_targets` targets (packed, native byte order)."""
    import numpy as np

    return np.dtype([
        ("id", "=u8"), ("flops", "=f8"), ("bytes", "=f8"),
        ("time_us", "=f8", (n_targets,)), ("share_us", "=f8", (n_targets,)),
        ("method", "u1", (n_targets,)), ("share_method", "u1", (n_targets,)),
        ("op_class", "u1"), ("precision", "u1"),
    ])


class OpRows:
    """Per-op forecasts of one step for `targets`, in step order.

    ``array`` is a numpy structured array with fields ``id``, ``flops``, ``bytes``,
    ``time_us[T]`` (the op's whole time on each target), ``share_us[T]`` (what it adds to the
    step total), ``method[T]``, ``share_method[T]``, ``op_class`` and ``precision`` (codes:
    names in :data:`METHODS`, :data:`OP_CLASSES`, :data:`PRECISIONS`). A read-only view of the
    engine's bytes: no copy, no object per op.
    """

    __slots__ = ("_data", "targets", "_array")

    def __init__(self, data: bytes | _engine.OpRowsBuffer, targets: Sequence[str]) -> None:
        self._data = data
        self.targets = list(targets)
        self._array: Any = None

    @property
    def array(self) -> "np.ndarray":
        if self._array is None:
            import numpy as np

            # An OpRowsBuffer is a buffer; numpy's stubs before Python 3.12 list only their own kinds.
            self._array = np.frombuffer(self._data, dtype=row_dtype(len(self.targets)))  # type: ignore[arg-type]
        return self._array

    @property
    def nbytes(self) -> int:
        return len(self._data)

    def __len__(self) -> int:
        return len(self._data) // row_dtype(len(self.targets)).itemsize

    def columns(self) -> dict[str, list[Any]]:
        """Each field as a Python list (per target: a list of per-op lists), names decoded."""
        a = self.array
        n = len(self.targets)
        methods = [[METHODS[c] for c in a["method"][:, t].tolist()] for t in range(n)]
        share_methods = [[METHODS[c] for c in a["share_method"][:, t].tolist()] for t in range(n)]
        return {
            "id": a["id"].tolist(), "flops": a["flops"].tolist(), "bytes": a["bytes"].tolist(),
            "op_class": [OP_CLASSES[c] for c in a["op_class"].tolist()],
            "precision": [PRECISIONS[c] for c in a["precision"].tolist()],
            "time_us": [a["time_us"][:, t].tolist() for t in range(n)],
            "share_us": [a["share_us"][:, t].tolist() for t in range(n)],
            "method": methods, "share_method": share_methods,
        }

    def records(self) -> list[dict[str, Any]]:
        """The rows as the engine's JSON ops array would hold them (one dict per op):
        ``{"id", "predictions": [[time_us, method, share_us, share_method] per target],
        "class", "flops", "bytes", "precision"}``."""
        c = self.columns()
        n = len(self.targets)
        out = []
        for i, op_id in enumerate(c["id"]):
            out.append({
                "id": op_id,
                "predictions": [[c["time_us"][t][i], c["method"][t][i], c["share_us"][t][i],
                                 c["share_method"][t][i]] for t in range(n)],
                "class": c["op_class"][i], "flops": c["flops"][i], "bytes": c["bytes"][i],
                "precision": c["precision"][i],
            })
        return out
