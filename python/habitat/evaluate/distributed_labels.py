"""NeuSight-format distributed labels of one GPU, and the single-GPU trace each is forecast from.

A GPU's folder (NeuSight's ``labels/<GPU>/``) holds one label per measured configuration,
``<model>-train-<seq>-<B>-<config>.json`` (``e2e_latency`` in ms), ``B`` the global batch and
``config`` the parallelism: ``dp4`` (4 data-parallel replicas), ``tp4`` (4 tensor-parallel
ranks), ``pp4_1`` (4 pipeline stages, 1 micro-batch). The configuration each implies, as NeuSight
ran it (benchmarks/accuracy/neusight_distributed/README.md: Megatron-LM core_r0.5.0 through
accelerate 1.0.0):

- ``dp<d>``: d replicas of batch B/d; Megatron's DDP with ``overlap_grad_reduce`` off (its
  default) all-reduces every gradient after the backward pass, in one bucket;
- ``tp<t>``: the batch B on every one of t tensor-parallel ranks (column/row-parallel layers);
- ``pp<p>_<m>``: p stages over the layers, the batch B split into m micro-batches.

The single-GPU step is NeuSight's per-node trace of the same model, ``<model>-train-<seq>-<b>.csv``:
from the GPU's own folder when it has one (its node times are then the target's own), otherwise
from the A100 80GB PCIe (``ORIGIN``). A configuration needs the trace at the batch one rank runs;
where the folder has no trace at that batch, a trace at a batch b that divides it is rewritten:
every tensor's leading dimension b (or b x seq, the flattened tokens) becomes the batch needed,
and each node's measured times scale by the kernel models' ratio of the new work to the old on
the GPU that measured them (what the runtime-based forecast then scales to the target). A trace
of batch 1 is never rewritten (a leading 1 is ambiguous).
"""
from __future__ import annotations

import ast
import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from habitat.analysis.parallel import Parallelism
from habitat.evaluate import models as M

#: The GPU whose single-GPU traces stand in where a target's folder has none.
ORIGIN = "NVIDIA_A100_80GB_PCIe"

_LABEL = re.compile(r"^(?P<model>.+)-train-(?P<seq>\d+)-(?P<batch>\d+)-(?P<config>(?:dp|tp|pp)\d+(?:_\d+)?)$")
_TRACE = re.compile(r"^(?P<model>.+)-train-(?P<seq>\d+)-(?P<batch>\d+)$")
_CONFIG_ORDER = {"dp": 0, "tp": 1, "pp": 2}


@dataclass(frozen=True)
class Label:
    """One measured configuration of a target GPU's folder."""

    path: Path
    model: str
    seq: int
    global_batch: int
    config: str                  # "dp4", "tp4", "pp4_1"
    parallelism: Parallelism
    trace_batch: int             # the batch of the single-GPU step a rank's work comes from
    measured_ms: float

    @property
    def stem(self) -> str:
        return self.path.stem


def parallelism_of(config: str, global_batch: int) -> tuple[Parallelism, int]:
    """The parallelism a label's config implies, and the single-GPU trace batch it needs."""
    kind, degree, micro = config[:2], int(re.findall(r"\d+", config)[0]), config.partition("_")[2]
    if degree < 1:
        raise ValueError(f"config {config!r}: the parallel degree must be at least 1")
    if micro and kind != "pp":
        raise ValueError(f"config {config!r}: micro-batches (_{micro}) go with pp")
    if kind == "dp":
        if global_batch % degree:
            raise ValueError(f"config {config!r}: a global batch of {global_batch} does not split over "
                             f"{degree} replicas")
        one_bucket = float("inf")  # Megatron's DDP, overlap_grad_reduce off: one bucket, after backward
        return Parallelism(data=degree, overlap=False, bucket_mb=one_bucket, first_bucket_mb=one_bucket), \
            global_batch // degree
    if kind == "tp":
        return Parallelism(tensor=degree), global_batch
    micro_batches = int(micro) if micro else 1
    return Parallelism(pipeline=degree, micro_batches=micro_batches), global_batch


def find_labels(target_dir: Path) -> list[Label]:
    """Every distributed label in `target_dir`, by global batch then dp, tp, pp."""
    labels = []
    for path in sorted(Path(target_dir).glob("*-train-*-*-*.json")):
        m = _LABEL.match(path.stem)
        if not m:
            continue
        batch = int(m["batch"])
        parallelism, trace_batch = parallelism_of(m["config"], batch)
        measured = json.loads(path.read_text()).get("e2e_latency")
        if not isinstance(measured, (int, float)) or measured <= 0:
            raise ValueError(f"{path}: 'e2e_latency' must be a positive number of ms, got {measured!r}")
        labels.append(Label(path, m["model"], int(m["seq"]), batch, m["config"], parallelism, trace_batch,
                            float(measured)))
    if not labels:
        raise FileNotFoundError(f"{target_dir} holds no distributed label: expected files named "
                                "<model>-train-<seq>-<batch>-<dp4|tp4|pp4_1>.json (NeuSight's labels/<GPU>/)")
    return sorted(labels, key=lambda lb: (lb.model, lb.seq, lb.global_batch, _CONFIG_ORDER[lb.config[:2]], lb.config))


def trace_batches(folder: Path, model: str, seq: int) -> list[int]:
    """Batches of the single-GPU traces of `model` at `seq` in `folder`."""
    out = []
    for path in Path(folder).glob(f"{model}-train-{seq}-*.csv"):
        m = _TRACE.match(path.stem)
        if m and m["model"] == model and int(m["seq"]) == seq and path.with_suffix(".json").is_file():
            out.append(int(m["batch"]))
    return sorted(out)


@dataclass(frozen=True)
class TraceChoice:
    """Where a label's single-GPU step comes from."""

    folder: Path
    batch: int            # the batch needed
    traced_batch: int     # the batch of the trace read (rewritten to `batch` when they differ)

    @property
    def gpu(self) -> str:
        return self.folder.name

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "batch": self.batch, "traced_batch": self.traced_batch}


def choose_trace(data: Path, target_dir: Path, label: Label) -> TraceChoice:
    """The target's own trace when its folder has one of the model, else the ORIGIN's; at the
    batch needed, or at the largest batch > 1 that divides it (rewritten)."""
    own = trace_batches(target_dir, label.model, label.seq)
    folder = Path(target_dir) if own else Path(data) / ORIGIN
    batches = own or trace_batches(folder, label.model, label.seq)
    if not batches:
        raise FileNotFoundError(f"no single-GPU trace of {label.model} at sequence {label.seq}: neither "
                                f"{target_dir} nor {folder} holds {label.model}-train-{label.seq}-<batch>.csv")
    if label.trace_batch in batches:
        return TraceChoice(folder, label.trace_batch, label.trace_batch)
    dividing = [b for b in batches if b > 1 and label.trace_batch % b == 0]
    if not dividing:
        raise ValueError(f"{label.stem} needs the single-GPU step at batch {label.trace_batch}; {folder} has "
                         f"traces at {batches}, none > 1 dividing it")
    return TraceChoice(folder, label.trace_batch, max(dividing))


@dataclass
class Node:
    """One fx node of the trace: its work and its output's shape."""

    work: M.NodeWork
    out_shape: list[int]


def _shape(text: str) -> list[int]:
    try:
        shape = list(ast.literal_eval(text)) if text.startswith("(") else []
    except (ValueError, SyntaxError):
        return []
    return [int(x) for x in shape if isinstance(x, int)]


def _rebatched_dims(dims: list, old: int, new: int, seq: int) -> list:
    if dims and isinstance(dims[0], int):
        if dims[0] == old:
            return [new, *dims[1:]]
        if dims[0] == old * seq:
            return [new * seq, *dims[1:]]
    return list(dims)


def rebatched_row(row: dict[str, str], old: int, new: int, seq: int) -> dict[str, str]:
    """The CSV row with every tensor's leading batch (or batch x seq) dimension `old` -> `new`."""
    out = dict(row)
    try:
        ins = ast.literal_eval(row["input_shapes"]) if row["input_shapes"] else []
        out["input_shapes"] = str([_rebatched_dims(list(s), old, new, seq) if isinstance(s, (list, tuple)) else s
                                   for s in ins])
    except (ValueError, SyntaxError):
        pass
    if row["output_shape"].startswith("("):
        try:
            out["output_shape"] = str(tuple(_rebatched_dims(list(ast.literal_eval(row["output_shape"])), old, new, seq)))
        except (ValueError, SyntaxError):
            pass
    return out


def trace_nodes(choice: TraceChoice, model: str, seq: int, measured_on: Callable[[M.Part], float]) -> list[Node]:
    """The single-GPU trace `choice` names, at its batch. `measured_on` times a part on the GPU
    that measured the trace (it scales measured times when the batch is rewritten)."""
    csv_path = choice.folder / f"{model}-train-{seq}-{choice.traced_batch}.csv"
    layers = int(json.loads(csv_path.with_suffix(".json").read_text())["num_layer"])
    nodes = []
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            if choice.traced_batch == choice.batch:
                nodes.append(Node(M.node_work(row, layers, True), _shape(row["output_shape"])))
                continue
            old = M.node_work(row, layers, True)
            new_row = rebatched_row(row, choice.traced_batch, choice.batch, seq)
            new = M.node_work(new_row, layers, True)
            for phase, t in old.measured.items():
                before, after = old.parts.get(phase), new.parts.get(phase)
                if before and after:
                    b = M._parts_time(before, measured_on)
                    new.measured[phase] = t * M._parts_time(after, measured_on) / b if b > 0 else t
            nodes.append(Node(new, _shape(new_row["output_shape"])))
    return nodes
