"""One measured case of the kernel collector (collect_kernels.py): an op call on tensors made
beforehand, the precision it runs in and the shape columns of its CSV row; and the contexts a
case runs under."""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Callable

import torch

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The precisions of the memory-bound and training-step families (batch norm: of its input).
MEMORY_PRECISIONS = ("fp32", "bf16")
MEMORY_FORMATS = {"nchw": torch.contiguous_format, "nhwc": torch.channels_last}


@dataclass
class Case:
    op: str                 # the CSV's OPName: bmm, linear, conv, sdpa, gelu, adamw, ...
    phase: str              # fwd, bwd, bwd_data, bwd_weight, fwd+bwd, step
    precision: str
    shape: dict[str, int | str]  # the row's shape columns
    run: Callable[[], object]
    stem: str | None = None  # the CSV file's name before _<precision> (default: op)

    @property
    def file(self) -> str:
        return f"{self.stem or self.op}_{self.precision}"


class _Tf32(contextlib.AbstractContextManager):
    def __init__(self, on: bool):
        self.on = on

    def __enter__(self):
        self.saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = self.on
        torch.backends.cudnn.allow_tf32 = self.on
        return self

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.saved
        return False


def precision_context(prec: str) -> contextlib.AbstractContextManager:
    """fp32 runs with TF32 off (SIMT kernels), tf32 with it on, for matmuls and cuDNN alike."""
    return _Tf32(prec == "tf32")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Forcing one SDPA backend warns for every shape it rejects: those cases are dropped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def no_grad(run: Callable[[], object]) -> object:
    with torch.no_grad():
        return run()
