"""The phases of one training step on a rank of a cluster, which habitat.analysis.parallel's
parallel_step puts together (the model, and what each parallelism does, is described there):
the passes tensor parallelism splits and what the framework adds to them, the passes on one
stage or over a pipeline, the optimizer's share, FSDP's or DDP's collectives, and the ledger
of every collective. Times are microseconds."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from habitat.analysis.cluster import Cluster
    from habitat.analysis.parallel import Parallelism, StepWork

MB = 1 << 20
#: torch DDP's bucket_cap_mb default and its first bucket (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES).
DDP_BUCKET_MB = 25.0
DDP_FIRST_BUCKET_MB = 1.0


class Ledger:
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
                   p: Parallelism, ledger: Ledger) -> float:
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
          ledger: Ledger) -> tuple[float, float, float]:
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


def framework_passes(work: StepWork, p: Parallelism, hf: float, hb: float, bwd: float,
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
class Passes:
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
class Schedule:
    """The forward and backward passes as a rank runs them (us): the time they take, the device
    compute in them, the communication they expose, the backward pass the gradient all-reduce
    follows, and a pipeline's bubble."""

    time_us: float
    compute_us: float
    exposed_us: float
    backward_us: float
    bubble_us: float = 0.0


def tensor_parallel(work: StepWork, cluster: Cluster, t: int, ledger: Ledger, notes: list[str]) -> Passes:
    """The passes with the split work on one of t ranks (its shard's forecast where the step has
    one, else / t), the rest replicated, and 2+2 all-reduces per layer."""
    # launches: TP does not divide them
    passes = Passes(work.forward_us, work.backward_us, work.host_forward_us, work.host_backward_us)
    if t <= 1:
        return passes
    shard_f, shard_b = work.tp_sharded_us.get(t, (work.tp_split_forward_us / t, work.tp_split_backward_us / t))
    passes.forward_us = passes.forward_us - work.tp_split_forward_us + shard_f
    passes.backward_us = passes.backward_us - work.tp_split_backward_us + shard_b
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


def single_stage(passes: Passes) -> Schedule:
    """The passes one after the other, each the longer of its host and device time."""
    hf, hb = passes.host_forward_us, passes.host_backward_us
    fwd, bwd = passes.forward_us, passes.backward_us
    seen_f, seen_b = max(hf, fwd + passes.tp_forward_comm_us), max(hb, bwd + passes.tp_backward_comm_us)
    # TP's all-reduces run in the compute stream: exposed is what they add to each pass
    return Schedule(time_us=seen_f + seen_b, compute_us=fwd + bwd,
                    exposed_us=seen_f - max(hf, fwd) + seen_b - max(hb, bwd), backward_us=seen_b)


def _pipeline_stages(work: StepWork, passes: Passes, pp: int, m: int) -> list[tuple[float, float, float, float]]:
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


def pipeline(work: StepWork, passes: Passes, cluster: Cluster, p: Parallelism, ledger: Ledger) -> Schedule:
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
    return Schedule(time_us=step_fwd_bwd, compute_us=compute, exposed_us=exposed,
                    backward_us=max(stages[0][1], stages[0][3], 1e-9) * m, bubble_us=bubble)


def optimizer_times(work: StepWork, p: Parallelism, passes: Passes, shard: float) -> tuple[float, float]:
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


def data_parallel(work: StepWork, passes: Passes, schedule: Schedule, cluster: Cluster, p: Parallelism,
                  shard: float, ledger: Ledger, notes: list[str]) -> float:
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


def host_bound_phases(passes: Passes, p: Parallelism, optimizer: float, host_optimizer: float) -> list[str]:
    """The phases whose host time exceeds a rank's device work: what tensor parallelism left it,
    per micro-batch in a pipeline (whose stages each issue their share of the launches per
    micro-batch)."""
    per_pass = p.micro_batches if p.pipeline > 1 else 1
    return [name for name, h, d in (("forward", passes.host_forward_us, passes.forward_us / per_pass),
                                    ("backward", passes.host_backward_us, passes.backward_us / per_pass),
                                    ("optimizer", host_optimizer, optimizer)) if h > d]
