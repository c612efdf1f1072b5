"""Every real-model workload of the benchmark, by name: the four of benchmarks/gpu/models.py
(measured on an H100 and an H200: benchmarks/results/<gpu>/) and the networks built from
configs in config_models.py. Used by real_models.py (CPU traces) and benchmarks/gpu/
real_model_kernels.py (measured kernel sums on a GPU).
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
PRECISIONS = ("fp32", "bf16")  # bf16: the step under torch.autocast(dtype=torch.bfloat16)
GPU_BENCHMARK = ("resnet50", "gpt2_small", "lstm_seq2seq", "dcgan")  # benchmarks/gpu/models.py
FROM_CONFIGS = ("mobilenet_v3_large", "vit_b16", "bert_base_mlm", "t5_small")  # config_models.py

# Keyword arguments of models.py's builders for a seconds-long CPU run (tests, --smoke).
_GPU_MODEL_SMOKE = {"resnet50": {"batch": 2}, "gpt2_small": {"batch": 1, "context": 32},
                    "lstm_seq2seq": {"batch": 2, "length": 4}, "dcgan": {"batch": 2}}


@dataclass(frozen=True)
class Workload:
    name: str
    build: Callable[..., Any]  # (device, **sizes) -> step(autocast); some steps have .prime()
    description: str
    smoke: dict[str, int]

    @property
    def batch(self) -> int:
        """The batch size the workload trains with (its builder's default)."""
        return int(inspect.signature(self.build).parameters["batch"].default)

    def step(self, device: Any, smoke: bool = False, batch: int | None = None) -> Any:
        """A fresh model, optimiser and batch: its sizes, or the smoke sizes; `batch` overrides
        the batch size alone."""
        sizes = dict(self.smoke) if smoke else {}
        if batch is not None:
            sizes["batch"] = batch
        return self.build(device, **sizes)


def _gpu_models() -> Any:
    """benchmarks/gpu/models.py, imported under its own name (tests/python has a models.py)."""
    name = "habitat_gpu_benchmark_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "gpu" / "models.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclass looks its module up by name
        spec.loader.exec_module(module)
    return sys.modules[name]


def load(device_type: str) -> dict[str, Workload]:
    """name -> workload, the four GPU-benchmark models first, their steps autocasting on
    `device_type` (the GPU runs used CUDA autocast; a CPU trace of the same step uses CPU
    autocast)."""
    import torch

    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import config_models  # benchmarks/accuracy/config_models.py

    models = _gpu_models()
    models._autocast = lambda enabled: torch.autocast(device_type, dtype=torch.bfloat16, enabled=enabled)
    out = {w.name: Workload(w.name, w.build, w.description, _GPU_MODEL_SMOKE[w.name]) for w in models.WORKLOADS}
    out.update({w[0]: Workload(*w) for w in config_models.CONFIG_WORKLOADS})
    return out


def steady(step: Any, autocast: bool) -> None:
    """Brings a freshly built step to steady state (optimiser state exists), as a traced step
    later in training would be: by priming the optimiser where the step can, else one step."""
    prime = getattr(step, "prime", None)
    if prime is not None:
        prime()
    else:
        step(autocast)
