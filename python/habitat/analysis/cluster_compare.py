"""Clusters ranked by step time and cost: "8x H100 or 16x A100 for this job?".

Each cluster's step comes from the captured single-GPU step forecast on that cluster's GPU
(habitat.analysis.step_work) through the parallel step model; its cost is the price per
GPU-hour (the dated price table, habitat/data/prices.json, or yours) times the GPUs, times
the run's time. With data parallelism the step's batch is per replica, so a cluster of N GPUs
processes N times the samples per step: the table also gives the time per single-GPU batch
(ms/batch), which is what to compare when the global batch is fixed. A step that is host-bound
on one GPU stays so on every rank (habitat.analysis.parallel): the table says which, and gives
per cluster the shares of the step that are exposed communication, host cadence and pipeline
bubble.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence, cast

from habitat.analysis.cluster import Cluster
from habitat.analysis.compare import format_duration, format_usd, run_iterations
from habitat.analysis.parallel import ParallelForecast, Parallelism, parallel_step
from habitat.analysis.pricing import PriceTable, price_table
from habitat.analysis.step_work import step_work_from_step

if TYPE_CHECKING:
    from habitat.data.forecast import Forecast


@dataclass
class ClusterRow:
    rank: int
    forecast: ParallelForecast
    run_seconds: float
    usd_per_gpu_hour: float | None
    run_cost_usd: float | None
    replicas: int  # data-parallel replicas: single-GPU batches per step

    @property
    def cluster(self) -> Cluster:
        return self.forecast.cluster

    @property
    def ms_per_batch(self) -> float:
        """The step's time per single-GPU batch: what to compare when the global batch is fixed."""
        return self.forecast.time_ms / self.replicas

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, **self.forecast.to_dict(), "gpus": self.cluster.world_size,
                "run_seconds": self.run_seconds, "usd_per_gpu_hour": self.usd_per_gpu_hour,
                "run_cost_usd": self.run_cost_usd, "replicas": self.replicas,
                "ms_per_batch": round(self.ms_per_batch, 4)}


class ClusterComparison:
    def __init__(self, rows: list[ClusterRow], iterations: int) -> None:
        self.rows = rows
        self.iterations = iterations

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"iterations": self.iterations, "clusters": [r.to_dict() for r in self.rows]}

    def __str__(self) -> str:
        head = (f"{'#':>2s}  {'cluster':44s} {'parallel':12s} {'ms/step':>9s} {'ms/batch':>9s} "
                f"{'comm':>5s} {'host':>5s} {'bubble':>6s} {'run':>9s} {'$/GPU-h':>8s} {'run cost':>10s}")
        lines = [f"Clusters for {self.iterations} steps, ranked by step time (as seen: the single-GPU step's host "
                 "cadence included where it has a timeline)", head]
        for r in self.rows:
            f = r.forecast
            price = f"{r.usd_per_gpu_hour:.2f}" if r.usd_per_gpu_hour is not None else "-"
            cost = format_usd(r.run_cost_usd) if r.run_cost_usd is not None else "-"
            shares = " ".join(f"{f.share(us) * 100:{w}.0f}%" for us, w in
                              ((f.exposed_comm_us, 4), (f.host_bound_us, 4), (f.bubble_us, 5)))
            lines.append(f"{r.rank:2d}  {r.cluster.label()[:44]:44s} {f.parallelism.label()[:12]:12s} "
                         f"{f.time_ms:9.2f} {r.ms_per_batch:9.3f} {shares} "
                         f"{format_duration(r.run_seconds):>9s} "
                         f"{price:>8s} {cost:>10s}")
        lines.append("Shares of the step: comm = communication exposed (not hidden behind compute), host = what the "
                     "host's launch cadence adds (the GPU waits for launches), bubble = pipeline stages idle; each a share "
                     "of the whole step, so they may overlap (stages idle whatever sets their pace).")
        lines.append("A data-parallel step processes one single-GPU batch per replica; ms/batch is the step "
                     "over the replicas, what to compare when the global batch is fixed.")
        bound = [str(r.rank) for r in self.rows if r.forecast.host_bound]
        if bound:
            lines.append(f"Host-bound (#{', #'.join(bound)}): the host's launch cadence sets the step on every rank; "
                         "a faster GPU will not shorten it (more GPUs only add replicas), fewer launches would "
                         "(CUDA graphs, torch.compile, larger batches). Equal times rank by cost.")
        return "\n".join(lines)


def forecast_on_cluster(forecast: "Forecast", cluster: Cluster,
                        parallelism: Parallelism | str | None = None) -> ParallelForecast:
    """The latest detailed step of `forecast` on `cluster` (its GPU must be a target)."""
    step = _detailed_step(forecast, cluster.gpu)
    plan = Parallelism.parse(parallelism, cluster.world_size)
    work = step_work_from_step(step, cluster.gpu, (plan.tensor,), forecast.origin)
    return parallel_step(work, cluster, plan)


def as_cluster(spec: "Cluster | dict[str, Any]") -> Cluster:
    """A Cluster, or one from its keyword arguments (predict_on stores them so)."""
    if isinstance(spec, Cluster):
        return spec
    if isinstance(spec, dict):
        return Cluster(**spec)
    raise TypeError(f"a cluster is a habitat.Cluster(...), got {spec!r}")


def forecast_on_clusters(forecast: "Forecast", clusters: Sequence["Cluster | dict[str, Any]"],
                         parallelism: Parallelism | str | None = None, *,
                         check: bool = False) -> list[ParallelForecast]:
    resolved = [as_cluster(c) for c in clusters]
    if check:
        for c in resolved:
            Parallelism.parse(parallelism, c.world_size)
        return []
    return [forecast_on_cluster(forecast, c, parallelism) for c in resolved]


def compare_clusters(forecast: "Forecast", clusters: Sequence[Cluster],
                     parallelism: Parallelism | str | None = None, *, iterations: int = 1000,
                     epochs: float | None = None, steps_per_epoch: int | None = None,
                     prices: "PriceTable | dict[str, Any] | None" = None) -> ClusterComparison:
    total = run_iterations(iterations, epochs, steps_per_epoch)
    table = price_table(prices)
    rows: list[ClusterRow] = []
    for cluster in clusters:
        fc = forecast_on_cluster(forecast, cluster, parallelism)
        seconds = fc.time_us / 1e6 * total
        price = table.get(cluster.gpu)
        usd = None if price is None else price.usd_per_hour
        rows.append(ClusterRow(rank=0, forecast=fc, run_seconds=seconds, usd_per_gpu_hour=usd,
                               run_cost_usd=None if usd is None else usd * cluster.world_size * seconds / 3600,
                               replicas=fc.parallelism.data))
    # equal step times (host-bound steps often are: they play one host cadence and differ only
    # by float rounding, ~1e-12 ms, so times are compared to a nanosecond): the cheaper run first
    rows.sort(key=lambda r: (round(r.forecast.time_us, 3),
                             r.run_cost_usd if r.run_cost_usd is not None else float("inf")))
    for i, r in enumerate(rows):
        r.rank = i + 1
    return ClusterComparison(rows, total)


def _detailed_step(forecast: "Forecast", gpu: str):
    from habitat.data.engine import trace_document
    from habitat.data.forecast import Forecast

    for step in reversed(forecast.steps):
        if step.ops:
            if gpu in step.targets:
                return step
            trace = cast("dict[str, Any]", step.trace)  # a step with its ops holds its trace
            return Forecast.from_trace(trace_document(forecast.origin, [trace]), [gpu]).latest
    raise ValueError("the forecast has no step recorded in detail to put on a cluster")
