"""One training step on a cluster, from the step on one GPU: data, tensor and pipeline parallel.

The input is a :class:`StepWork`: the single-GPU step's forward, backward and optimizer time
on the target GPU, its gradients (bytes, and when in the backward pass each is ready), and,
for tensor and pipeline parallelism, which part of its time the model's layers spend in work
tensor parallelism splits and how big the activations between layers are. The collectives come
from the engine's model (habitat.analysis.cluster). Times are microseconds.

- **Data parallel (DDP)**: every replica runs the step on its own batch; gradients are
  all-reduced in buckets (``bucket_mb=25``, DDP's default, the first bucket 1 MB as DDP's
  ``_DEFAULT_FIRST_BUCKET_BYTES``) in the order they become ready (reverse parameter order),
  on one communication stream that overlaps the rest of the backward pass; what is left when
  the backward pass ends is exposed. ``overlap=False`` all-reduces after it (Megatron-LM's
  default, ``overlap_grad_reduce=False``).
- **Sharded data parallel (FSDP / ZeRO-3)**: each layer's parameters are all-gathered before
  its forward and again before its backward, its gradients reduce-scattered; the collectives
  overlap the compute of the neighbouring layers, so only what exceeds it is exposed. The
  optimizer updates 1/d of the state.
- **Tensor parallel (Megatron-LM)**: the work tensor parallelism splits (the layers' matrix
  products and attention) is divided by t; the rest (layer norms, dropouts, residual adds) runs
  on every rank; each layer all-reduces its hidden state twice in the forward pass (after the
  attention and MLP row-parallel products) and twice in the backward pass, plus one all-reduce
  each way for the vocabulary-parallel embedding and output layer.
- **The host** (where the single-GPU step has a timeline): each phase takes at least the time
  the host needs to issue it (``host_*_us``), however much its device work shrinks. Tensor
  parallelism divides a rank's device work, not its launches; a pipeline stage issues its layers'
  launches once per micro-batch; the optimizer's launches follow the parameter tensors a rank
  holds (1/p of them on a pipeline stage; a slice of each under TP and FSDP, as many launches).
  DDP's gradient all-reduce runs on its own stream, and the optimizer's kernels wait for it on
  the device while the host goes on issuing them, so a host-bound optimizer hides it.
- **What the framework adds** (``StepWork.framework``, for a step captured on one device:
  habitat.analysis.distributed_host): every collective's launch on the host (TP's all-reduces
  in each pass, FSDP's gathers and reduce-scatters per unit, DDP's buckets), and DDP's reducer
  over every gradient tensor (its mul into the bucket in the backward pass, its copy back after
  the all-reduce, as the optimizer's kernels wait for it), host and device time.
- **Pipeline parallel**: layers are split evenly over p stages (the embedding with the first,
  the head with the last), the batch into m micro-batches; a step takes
  ``sum(stage) + (m - 1) * max(stage)`` per micro-batch's forward and backward (the bubble is
  ``(p-1)/(m+p-1)`` of the step when the stages are equal), plus a send/recv of the activations
  at each stage boundary each way, and all-reduces the tied embedding's gradient between the
  first and last stage.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from habitat.analysis import parallel_phases as phase
from habitat.analysis.cluster import Cluster
from habitat.analysis.parallel_phases import DDP_BUCKET_MB, DDP_FIRST_BUCKET_MB
from habitat.analysis.parallel_phases import MB as MB  # re-exported: this module's API
from habitat.analysis.parallel_phases import ddp_buckets as ddp_buckets  # re-exported: this module's API


@dataclass
class FrameworkWork:
    """What the distributed framework issues around a step that one GPU ran, per rank (us on the
    target; habitat.analysis.distributed_host): DDP's reducer over every parameter tensor of the
    step, in the backward pass and, after it, copying the reduced gradients back; and the host
    time of launching one collective from Python in the forward and in the backward pass, and of
    one of DDP's bucket all-reduces."""

    tensors: int = 0
    reducer_host_backward_us: float = 0.0
    reducer_backward_us: float = 0.0
    reducer_host_finalize_us: float = 0.0
    reducer_finalize_us: float = 0.0
    launch_forward_us: float = 0.0
    launch_backward_us: float = 0.0
    bucket_launch_us: float = 0.0  # one of DDP's bucket all-reduces (issued from C++, no Python gap)


@dataclass
class StepWork:
    """What the parallel model needs from a single-GPU step on one target (microseconds)."""

    forward_us: float
    backward_us: float
    optimizer_us: float = 0.0
    other_us: float = 0.0
    #: (bytes, ready time from the start of the backward pass in us), in the order produced.
    gradients: list[tuple[float, float]] = field(default_factory=list)
    #: transformer layers, and the part of the forward/backward time inside them that tensor
    #: parallelism splits (matrix products, attention)
    layers: int = 0
    tp_split_forward_us: float = 0.0
    tp_split_backward_us: float = 0.0
    #: per tensor-parallel degree, the split work's (forward, backward) time on one rank when
    #: forecast at its shard's shapes; a degree not here divides the split work by it
    tp_sharded_us: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: the hidden state between layers (batch x sequence x hidden x element size)
    activation_bytes: float = 0.0
    #: all-reduces of it per pass under tensor parallelism; 0 = Megatron's 2 per layer + 1
    tp_allreduces: int = 0
    #: forward/backward time outside the layers: before them (embedding) and after (head, loss)
    prologue_forward_us: float = 0.0
    prologue_backward_us: float = 0.0
    epilogue_forward_us: float = 0.0
    epilogue_backward_us: float = 0.0
    #: gradient bytes of the embedding that a pipeline's first and last stage share
    tied_embedding_bytes: float = 0.0
    #: what the host takes to issue each phase on the target (the single-GPU timeline's launch
    #: cadence); 0 = not known, the phase is its device time
    host_forward_us: float = 0.0
    host_backward_us: float = 0.0
    host_optimizer_us: float = 0.0
    #: the single-GPU step as seen minus its phases one after another (each the longer of its
    #: host and device time, plus other): negative where one phase's device backlog runs while
    #: the host issues the next. Data- and tensor-parallel ranks keep the phase sequence and
    #: carry it; a pipeline's stage schedule replaces the sequence.
    seen_adjust_us: float = 0.0
    #: what DDP, tensor parallelism and FSDP add on every rank (None: the step already holds it,
    #: captured on a rank of the job, or it is not known)
    framework: FrameworkWork | None = None

    @property
    def gradient_bytes(self) -> float:
        return float(sum(b for b, _ in self.gradients))

    @property
    def compute_us(self) -> float:
        return self.forward_us + self.backward_us + self.optimizer_us + self.other_us


@dataclass(frozen=True)
class Parallelism:
    """How the step is spread: data x tensor x pipeline = world size."""

    data: int = 1
    tensor: int = 1
    pipeline: int = 1
    micro_batches: int = 1
    sharded: bool = False        # FSDP / ZeRO-3 over the data-parallel group
    overlap: bool = True         # DDP overlaps the gradient all-reduce with the backward pass
    bucket_mb: float = DDP_BUCKET_MB
    first_bucket_mb: float = DDP_FIRST_BUCKET_MB

    @property
    def world_size(self) -> int:
        return self.data * self.tensor * self.pipeline

    def label(self) -> str:
        parts = []
        if self.data > 1:
            parts.append(f"{'FSDP' if self.sharded else 'DDP'}{self.data}")
        if self.tensor > 1:
            parts.append(f"TP{self.tensor}")
        if self.pipeline > 1:
            parts.append(f"PP{self.pipeline}x{self.micro_batches}mb")
        return "+".join(parts) or "single GPU"

    @classmethod
    def parse(cls, spec: "str | Parallelism | None", world_size: int) -> "Parallelism":
        """"ddp" / "dp" (every rank data parallel), "fsdp", "tp", "pp", or degrees such as
        "dp2,tp4" or "pp4x8" (4 stages, 8 micro-batches); None = DDP over the world size."""
        if isinstance(spec, Parallelism):
            p = spec
        else:
            s = (spec or "ddp").strip().lower()
            whole: dict[str, dict[str, Any]] = {
                "ddp": {"data": world_size}, "dp": {"data": world_size},
                "fsdp": {"data": world_size, "sharded": True}, "tp": {"tensor": world_size},
                "pp": {"pipeline": world_size}}
            if s in whole:
                return cls(**whole[s])
            kw: dict[str, Any] = {}
            for part in re.split(r"[,+ ]+", s):
                m = _PART.fullmatch(part)
                if not m:
                    raise ValueError(f"cannot read parallelism {spec!r}: use ddp, fsdp, tp, pp, or degrees "
                                     "such as 'dp2,tp4' or 'pp4x8' (4 stages, 8 micro-batches)")
                kind, degree, micro = m.group(1), int(m.group(2)), m.group(3)
                key = {"dp": "data", "ddp": "data", "fsdp": "data", "tp": "tensor", "pp": "pipeline"}[kind]
                kw[key] = degree
                if kind == "fsdp":
                    kw["sharded"] = True
                if micro:
                    if kind != "pp":
                        raise ValueError(f"micro-batches (x{micro}) go with pp, in {spec!r}")
                    kw["micro_batches"] = int(micro)
            p = cls(**kw)
        if p.world_size != world_size:
            raise ValueError(f"parallelism {p.label()} uses {p.world_size} GPUs but world_size is "
                             f"{world_size}: make data x tensor x pipeline = world_size")
        if min(p.data, p.tensor, p.pipeline, p.micro_batches) < 1:
            raise ValueError("parallel degrees and micro_batches must be at least 1")
        return p


_PART = re.compile(r"(fsdp|ddp|dp|tp|pp)(\d+)(?:x(\d+))?")


@dataclass
class ParallelForecast:
    """One step on a cluster: the time and where it goes (microseconds)."""

    cluster: Cluster
    parallelism: Parallelism
    time_us: float
    compute_us: float
    exposed_comm_us: float
    comm_us: float                      # all collectives, overlapped or not
    bubble_us: float = 0.0
    #: the single-GPU step's host cadence sets one of its phases (see notes)
    host_bound: bool = False
    #: what the host's cadence adds to the step: the step less the same step with the host left
    #: out (every phase its device time, no overlap between phases)
    host_bound_us: float = 0.0
    collectives: list[dict[str, Any]] = field(default_factory=list)  # kind, bytes, count, time_us
    notes: list[str] = field(default_factory=list)

    @property
    def time_ms(self) -> float:
        return self.time_us / 1000.0

    def share(self, part_us: float) -> float:
        """`part_us` as a share of the step (0 for an empty step)."""
        return part_us / self.time_us if self.time_us > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster.label(), "parallelism": self.parallelism.label(),
                "time_ms": round(self.time_ms, 4), "compute_ms": round(self.compute_us / 1e3, 4),
                "exposed_comm_ms": round(self.exposed_comm_us / 1e3, 4),
                "comm_ms": round(self.comm_us / 1e3, 4), "bubble_ms": round(self.bubble_us / 1e3, 4),
                "host_bound": self.host_bound, "host_bound_ms": round(self.host_bound_us / 1e3, 4),
                "shares": {"exposed_comm": round(self.share(self.exposed_comm_us), 4),
                           "host_bound": round(self.share(self.host_bound_us), 4),
                           "bubble": round(self.share(self.bubble_us), 4)},
                "collectives": self.collectives, "notes": self.notes}

    def __str__(self) -> str:
        return (f"{self.cluster.label()} {self.parallelism.label()}: {self.time_ms:.2f} ms/step "
                f"(compute {self.compute_us / 1e3:.2f}, communication {self.comm_us / 1e3:.2f} of which "
                f"exposed {self.exposed_comm_us / 1e3:.2f}, bubble {self.bubble_us / 1e3:.2f}"
                + (f"; host-bound {self.host_bound_us / 1e3:.2f}: the host's launch cadence)" if self.host_bound
                   else ")"))


def _checked_parallelism(parallelism: Parallelism | str | None, cluster: Cluster) -> Parallelism:
    """`parallelism` read (a spec) and checked against the cluster's size."""
    p = Parallelism.parse(parallelism, cluster.world_size) if not isinstance(parallelism, Parallelism) \
        else parallelism
    if p.world_size != cluster.world_size:
        raise ValueError(f"{p.label()} uses {p.world_size} GPUs; the cluster has {cluster.world_size}")
    if p.micro_batches < 1:
        raise ValueError("micro_batches must be at least 1")
    return p


def _layer_split_notes(work: StepWork, p: Parallelism) -> list[str]:
    """Refuses tensor and pipeline parallelism for a step without layers to split; a note where
    the layers do not split evenly over the pipeline's stages."""
    t, pp = p.tensor, p.pipeline
    if (t > 1 or pp > 1) and work.layers < 1:
        raise ValueError("tensor and pipeline parallelism need the model's layers, and this step has "
                         "none Habitat can split: no pair of matrix products (a column- then a "
                         "row-parallel linear layer) in its forward pass; use data parallelism")
    if pp > 1 and work.layers % pp:
        return [f"{work.layers} layers do not split evenly over {pp} stages: the largest stage "
                "sets the pace"]
    return []


def _host_bound_us(work: StepWork, cluster: Cluster, p: Parallelism, passes: phase.Passes, time_us: float) -> float:
    """What the host's cadence adds to the step of `time_us`: the same step with every phase its
    device time (no overlap between phases) takes that much less."""
    if not (passes.hosted or work.host_optimizer_us):
        return 0.0
    device_only = replace(work, host_forward_us=0.0, host_backward_us=0.0, host_optimizer_us=0.0,
                          seen_adjust_us=0.0)
    return max(0.0, time_us - parallel_step(device_only, cluster, p).time_us)


def parallel_step(work: StepWork, cluster: Cluster, parallelism: Parallelism | str | None = None
                  ) -> ParallelForecast:
    """The step `work` describes, run on `cluster` with `parallelism` (default: DDP over all)."""
    p = _checked_parallelism(parallelism, cluster)
    notes = _layer_split_notes(work, p)
    ledger = phase.Ledger()
    passes = phase.tensor_parallel(work, cluster, p.tensor, ledger, notes)
    shard = 1.0 / (p.tensor * p.pipeline)  # this rank's share of the parameters
    passes.host_forward_us, passes.host_backward_us, passes.backward_us = phase.framework_passes(
        work, p, passes.host_forward_us, passes.host_backward_us, passes.backward_us, shard)
    schedule = phase.pipeline(work, passes, cluster, p, ledger) if p.pipeline > 1 else phase.single_stage(passes)
    optimizer, host_optimizer = phase.optimizer_times(work, p, passes, shard)
    sync_exposed = phase.data_parallel(work, passes, schedule, cluster, p, shard, ledger, notes)

    # The optimizer's kernels wait on the device for the gradient all-reduce while the host goes on
    # issuing them: a host-bound optimizer hides what is left of it.
    optimizer_seen = max(host_optimizer, optimizer)
    tail = max(optimizer_seen, sync_exposed + optimizer)
    exposed = schedule.exposed_us + (tail - optimizer_seen)
    if cluster.nodes > 1 and ledger.total_us > 0:
        notes.append(f"across nodes the {cluster.inter['name']} network's all-reduces are timed with what published "
                     "multi-node nccl-tests curves achieved (held out 8.6-14.2% on three two-node curves); one cloud "
                     "cluster ran at 0.4x of it (benchmarks/collectives/README.md, 'Across nodes')")
    host_phases = phase.host_bound_phases(passes, p, optimizer, host_optimizer)
    if host_phases:
        notes.append(f"host-bound ({', '.join(host_phases)}): every rank issues its launches at the single-GPU "
                     "step's host cadence, which more GPUs do not shorten")
    time_us = schedule.time_us + tail + work.other_us + (work.seen_adjust_us if p.pipeline == 1 else 0.0)
    rows = sorted(ledger.rows.values(), key=lambda r: -r["time_us"])
    for r in rows:
        r["time_us"] = round(r["time_us"], 3)
        r["bytes"] = round(r["bytes"])
    return ParallelForecast(cluster=cluster, parallelism=p, time_us=time_us,
                            compute_us=schedule.compute_us + optimizer + work.other_us,
                            exposed_comm_us=exposed, comm_us=ledger.total_us, bubble_us=schedule.bubble_us,
                            host_bound=bool(host_phases),
                            host_bound_us=_host_bound_us(work, cluster, p, passes, time_us), collectives=rows,
                            notes=notes)
