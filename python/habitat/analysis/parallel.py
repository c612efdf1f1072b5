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

from habitat.analysis.cluster import Cluster

MB = 1 << 20
#: torch DDP's bucket_cap_mb default and its first bucket (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES).
DDP_BUCKET_MB = 25.0
DDP_FIRST_BUCKET_MB = 1.0


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


class _Ledger:
    """The step's collectives, one row per purpose: calls, total bytes, total time."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.total_us = 0.0

    def add(self, what: str, kind: str, nbytes: float, ranks: int, t_us: float, count: int = 1) -> float:
        row = self.rows.setdefault((what, kind, ranks), {"what": what, "kind": kind, "ranks": ranks,
                                                        "count": 0, "bytes": 0.0, "time_us": 0.0})
        row["count"] += count
        row["bytes"] += nbytes * count
        row["time_us"] += t_us * count
        self.total_us += t_us * count
        return t_us * count


def ddp_buckets(gradients: list[tuple[float, float]], bucket_mb: float = DDP_BUCKET_MB,
                first_bucket_mb: float = DDP_FIRST_BUCKET_MB) -> list[tuple[float, float]]:
    """Gradients (bytes, ready_us) in the order produced -> buckets (bytes, ready_us): a bucket
    closes once it holds its cap and is ready when its last gradient is."""
    buckets: list[tuple[float, float]] = []
    cap = first_bucket_mb * MB
    size, ready = 0.0, 0.0
    for nbytes, t in gradients:
        size += nbytes
        ready = max(ready, t)
        if size >= cap:
            buckets.append((size, ready))
            size, ready, cap = 0.0, 0.0, bucket_mb * MB
    if size > 0:
        buckets.append((size, ready))
    return buckets


def _gradient_sync(gradients: list[tuple[float, float]], backward_us: float, cluster: Cluster,
                   p: Parallelism, ledger: _Ledger) -> float:
    """Exposed us after the backward pass of the data-parallel all-reduce of `gradients`
    ((bytes, ready us)) in DDP buckets on one communication stream."""
    group = cluster.group(p.data, stride=p.tensor)
    end = 0.0
    for nbytes, ready in ddp_buckets(gradients, p.bucket_mb, p.first_bucket_mb):
        t = group.collective_us("all_reduce", nbytes)
        ledger.add("gradient buckets (data parallel)", "all_reduce", nbytes, p.data, t)
        end = max(end, ready if p.overlap else backward_us) + t
    return max(0.0, end - backward_us)


def _fsdp(work: StepWork, fwd_us: float, bwd_us: float, cluster: Cluster, p: Parallelism, scale: float,
          ledger: _Ledger) -> tuple[float, float, float]:
    """(exposed forward us, exposed backward us, total comm us) of FSDP's per-layer collectives
    behind passes of `fwd_us` and `bwd_us`."""
    d = p.data
    group = cluster.group(d, stride=p.tensor)
    params = work.gradient_bytes * scale
    units = max(1, work.layers or 1)
    per_unit = params / units
    ag = group.collective_us("all_gather", per_unit)
    rs = group.collective_us("reduce_scatter", per_unit)
    ledger.add("parameters (FSDP, forward)", "all_gather", per_unit, d, ag, units)
    ledger.add("parameters (FSDP, backward)", "all_gather", per_unit, d, ag, units)
    ledger.add("gradients (FSDP)", "reduce_scatter", per_unit, d, rs, units)
    # The first unit's gather cannot overlap; the others hide behind the previous unit's compute.
    fwd_exposed = ag + max(0.0, (units - 1) * ag - fwd_us * (units - 1) / units)
    bwd_exposed = rs + max(0.0, (units - 1) * (ag + rs) - bwd_us * (units - 1) / units)
    return fwd_exposed, bwd_exposed, units * (2 * ag + rs)


def _framework_passes(work: StepWork, p: Parallelism, hf: float, hb: float, bwd: float,
                      shard: float) -> tuple[float, float, float]:
    """The forward and backward passes' host time and the backward's device time with what the
    framework adds on a rank (work.framework): every collective's launch (TP's all-reduces, FSDP's
    gathers and reduce-scatters, DDP's buckets) and DDP's reducer over the gradients. Host time
    only where the step has a host cadence; the reducer's kernels over a rank's gradients always."""
    fw = work.framework
    if fw is None:
        return hf, hb, bwd
    hosted = hf > 0 or hb > 0
    if p.tensor > 1 and hosted:
        n = work.tp_allreduces or 2 * work.layers + 1
        hf, hb = hf + n * fw.launch_forward_us, hb + n * fw.launch_backward_us
    if p.data > 1 and p.sharded and hosted:
        units = max(1, work.layers or 1)
        hf, hb = hf + units * fw.launch_forward_us, hb + 2 * units * fw.launch_backward_us
    if p.data > 1 and not p.sharded:
        bwd += fw.reducer_backward_us * p.pipeline * shard  # each tensor a 1/t slice; stages split bwd
        if hosted:
            buckets = ddp_buckets([(b * shard, r) for b, r in work.gradients], p.bucket_mb, p.first_bucket_mb)
            hb += fw.reducer_host_backward_us + len(buckets) * fw.bucket_launch_us
    return hf, hb, bwd


def _share(part_us: float, whole_us: float, parts: int) -> float:
    """`part_us`'s share of `whole_us` (1/parts of it when the whole is 0)."""
    return part_us / whole_us if whole_us > 0 else 1.0 / parts


@dataclass
class _Passes:
    """A rank's forward and backward passes (us): their device time, the host's time to issue them
    and tensor parallelism's all-reduces in each (on the compute stream)."""

    forward_us: float
    backward_us: float
    host_forward_us: float
    host_backward_us: float
    tp_forward_comm_us: float = 0.0
    tp_backward_comm_us: float = 0.0

    @property
    def hosted(self) -> bool:
        """The single-GPU step has a host cadence for its passes."""
        return bool(self.host_forward_us or self.host_backward_us)


@dataclass
class _Schedule:
    """The forward and backward passes as a rank runs them (us): the time they take, the device
    compute in them, the communication they expose, the backward pass the gradient all-reduce
    follows, and a pipeline's bubble."""

    time_us: float
    compute_us: float
    exposed_us: float
    backward_us: float
    bubble_us: float = 0.0


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


def _tensor_parallel(work: StepWork, cluster: Cluster, t: int, ledger: _Ledger, notes: list[str]) -> _Passes:
    """The passes with the split work / t, the rest replicated, and 2+2 all-reduces per layer."""
    # launches: TP does not divide them
    passes = _Passes(work.forward_us, work.backward_us, work.host_forward_us, work.host_backward_us)
    if t <= 1:
        return passes
    passes.forward_us = passes.forward_us - work.tp_split_forward_us * (1 - 1 / t)
    passes.backward_us = passes.backward_us - work.tp_split_backward_us * (1 - 1 / t)
    group = cluster.group(t)
    ar = group.collective_us("all_reduce", work.activation_bytes)
    n = work.tp_allreduces or 2 * work.layers + 1
    passes.tp_forward_comm_us = ledger.add("hidden states (TP, forward)", "all_reduce", work.activation_bytes,
                                           t, ar, n)
    passes.tp_backward_comm_us = ledger.add("hidden states (TP, backward)", "all_reduce", work.activation_bytes,
                                            t, ar, n)
    if group.nodes > 1:
        notes.append("tensor parallelism crosses nodes: its all-reduces go through the NICs")
    return passes


def _single_stage(passes: _Passes) -> _Schedule:
    """The passes one after the other, each the longer of its host and device time."""
    hf, hb = passes.host_forward_us, passes.host_backward_us
    fwd, bwd = passes.forward_us, passes.backward_us
    seen_f, seen_b = max(hf, fwd + passes.tp_forward_comm_us), max(hb, bwd + passes.tp_backward_comm_us)
    # TP's all-reduces run in the compute stream: exposed is what they add to each pass
    return _Schedule(time_us=seen_f + seen_b, compute_us=fwd + bwd,
                     exposed_us=seen_f - max(hf, fwd) + seen_b - max(hb, bwd), backward_us=seen_b)


def _pipeline_stages(work: StepWork, passes: _Passes, pp: int, m: int) -> list[tuple[float, float, float, float]]:
    """Each stage's (forward, backward) device time per micro-batch and (forward, backward) host
    time: its layers, the embedding with the first stage, the head with the last."""
    fwd, bwd = passes.forward_us, passes.backward_us
    body_f = fwd - work.prologue_forward_us - work.epilogue_forward_us
    body_b = bwd - work.prologue_backward_us - work.epilogue_backward_us
    per_layer_f, per_layer_b = body_f / work.layers, body_b / work.layers
    base, extra = divmod(work.layers, pp)
    stages = []
    for s in range(pp):
        n_layers = base + (1 if s < extra else 0)
        f = n_layers * per_layer_f + (work.prologue_forward_us if s == 0 else 0) + \
            (work.epilogue_forward_us if s == pp - 1 else 0)
        b = n_layers * per_layer_b + (work.prologue_backward_us if s == 0 else 0) + \
            (work.epilogue_backward_us if s == pp - 1 else 0)
        # a stage issues its layers' launches once per micro-batch: its host time per
        # micro-batch is its share of the step's, not divided by m
        stages.append((f / m, b / m, passes.host_forward_us * _share(f, fwd, pp),
                       passes.host_backward_us * _share(b, bwd, pp)))
    return stages


def _pipeline(work: StepWork, passes: _Passes, cluster: Cluster, p: Parallelism, ledger: _Ledger) -> _Schedule:
    """The passes over the pipeline's stages: micro-batches, bubble, boundary send/recv and the
    tied embedding's all-reduce."""
    t, pp, m = p.tensor, p.pipeline, p.micro_batches
    stages = _pipeline_stages(work, passes, pp, m)
    tp_f_mb, tp_b_mb = passes.tp_forward_comm_us / pp / m, passes.tp_backward_comm_us / pp / m
    per_stage = [max(h_f, f + tp_f_mb) + max(h_b, b + tp_b_mb) for f, b, h_f, h_b in stages]
    pipeline_us = sum(per_stage) + (m - 1) * max(per_stage)
    ideal = sum(per_stage) * m / pp
    bubble = max(0.0, pipeline_us - ideal)
    # Megatron's rank order: tensor innermost, then data, then pipeline stages
    p2p_group = cluster.group(2, stride=t * p.data)
    sr = p2p_group.collective_us("send_recv", work.activation_bytes / m)
    # the first micro-batch's activations cross p-1 boundaries each way on the critical path;
    # later ones overlap the stages' compute
    ledger.add("activations (PP, forward)", "send_recv", work.activation_bytes / m, 2, sr, (pp - 1))
    ledger.add("activation gradients (PP, backward)", "send_recv", work.activation_bytes / m, 2, sr, pp - 1)
    p2p_exposed = 2 * (pp - 1) * sr
    compute = sum(f + b for f, b, _, _ in stages) * m / pp  # per rank, average
    step_fwd_bwd = pipeline_us + p2p_exposed
    exposed = p2p_exposed
    if work.tied_embedding_bytes > 0:
        emb = cluster.group(2, stride=cluster.world_size // 2).collective_us(
            "all_reduce", work.tied_embedding_bytes * (1.0 / t))
        ledger.add("tied embedding gradient (first and last stage)", "all_reduce",
                   work.tied_embedding_bytes / t, 2, emb)
        step_fwd_bwd += emb
        exposed += emb
    exposed += passes.tp_forward_comm_us / pp + passes.tp_backward_comm_us / pp if t > 1 else 0.0
    return _Schedule(time_us=step_fwd_bwd, compute_us=compute, exposed_us=exposed,
                     backward_us=max(stages[0][1], stages[0][3], 1e-9) * m, bubble_us=bubble)


def _optimizer(work: StepWork, p: Parallelism, passes: _Passes, shard: float) -> tuple[float, float]:
    """The optimizer's (device, host) time on a rank: its share of the parameters' update, and
    DDP's copy of the reduced gradients back before it."""
    optimizer = work.optimizer_us * shard
    # Launches follow the parameter tensors a rank holds: a pipeline stage holds 1/pp of them, a
    # tensor-parallel or (per-parameter) FSDP rank a slice of every one.
    host_optimizer = work.host_optimizer_us / p.pipeline
    fw = work.framework
    if fw is not None and p.data > 1 and not p.sharded:
        # DDP copies each reduced bucket back into the gradients before the optimizer: kernels that
        # wait for the all-reduce on the device while the host issues them, as the optimizer's do
        optimizer += fw.reducer_finalize_us * shard
        if passes.hosted:
            host_optimizer += fw.reducer_host_finalize_us / p.pipeline
    if p.data > 1 and p.sharded:
        optimizer /= p.data
    return optimizer, host_optimizer


def _data_parallel(work: StepWork, passes: _Passes, schedule: _Schedule, cluster: Cluster, p: Parallelism,
                   shard: float, ledger: _Ledger, notes: list[str]) -> float:
    """FSDP's collectives, added to `schedule`; or DDP's buckets overlapping the backward pass:
    the us of their all-reduce exposed after it (0 for FSDP and without data parallelism)."""
    if p.data <= 1:
        return 0.0
    if p.sharded:
        f_exp, b_exp, _ = _fsdp(work, max(passes.host_forward_us, work.forward_us),
                                max(passes.host_backward_us, work.backward_us), cluster, p, shard, ledger)
        schedule.time_us += f_exp + b_exp
        schedule.exposed_us += f_exp + b_exp
        return 0.0
    if not work.gradients:
        notes.append("no gradients recorded in the step: data-parallel communication is not counted")
    backward = schedule.backward_us
    # With pipelining (and with overlap=False) gradients are reduced after the last backward.
    late = p.pipeline > 1 or not p.overlap
    # ready times follow the backward pass as tensor parallelism shortened or stretched it
    stretch = backward / work.backward_us if work.backward_us > 0 else 1.0
    grads = [(b * shard, backward if late else min(r * stretch, backward)) for b, r in work.gradients]
    return _gradient_sync(grads, backward, cluster, p, ledger)


def _host_bound_phases(passes: _Passes, p: Parallelism, optimizer: float, host_optimizer: float) -> list[str]:
    """The phases whose host time exceeds a rank's device work: what tensor parallelism left it,
    per micro-batch in a pipeline (whose stages each issue their share of the launches per
    micro-batch)."""
    per_pass = p.micro_batches if p.pipeline > 1 else 1
    return [name for name, h, d in (("forward", passes.host_forward_us, passes.forward_us / per_pass),
                                    ("backward", passes.host_backward_us, passes.backward_us / per_pass),
                                    ("optimizer", host_optimizer, optimizer)) if h > d]


def _host_bound_us(work: StepWork, cluster: Cluster, p: Parallelism, passes: _Passes, time_us: float) -> float:
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
    ledger = _Ledger()
    passes = _tensor_parallel(work, cluster, p.tensor, ledger, notes)
    shard = 1.0 / (p.tensor * p.pipeline)  # this rank's share of the parameters
    passes.host_forward_us, passes.host_backward_us, passes.backward_us = _framework_passes(
        work, p, passes.host_forward_us, passes.host_backward_us, passes.backward_us, shard)
    schedule = _pipeline(work, passes, cluster, p, ledger) if p.pipeline > 1 else _single_stage(passes)
    optimizer, host_optimizer = _optimizer(work, p, passes, shard)
    sync_exposed = _data_parallel(work, passes, schedule, cluster, p, shard, ledger, notes)

    # The optimizer's kernels wait on the device for the gradient all-reduce while the host goes on
    # issuing them: a host-bound optimizer hides what is left of it.
    optimizer_seen = max(host_optimizer, optimizer)
    tail = max(optimizer_seen, sync_exposed + optimizer)
    exposed = schedule.exposed_us + (tail - optimizer_seen)
    if cluster.nodes > 1 and ledger.total_us > 0:
        notes.append(f"across nodes the {cluster.inter['name']} network's all-reduces are timed with what published "
                     "multi-node nccl-tests curves achieved (held out 8.6-14.2% on three two-node curves); one cloud "
                     "cluster ran at 0.4x of it (benchmarks/collectives/README.md, 'Across nodes')")
    host_phases = _host_bound_phases(passes, p, optimizer, host_optimizer)
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
