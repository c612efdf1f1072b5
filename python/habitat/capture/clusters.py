"""predict_on's multi-GPU arguments (world_size, interconnect, network, gpus_per_node,
cluster, parallel) as the clusters and parallelism its Forecast holds, checked before any step
runs. Torch-free."""
from __future__ import annotations

from typing import Any

from habitat.data.forecast import Forecast


def set_clusters(forecast: Forecast, world_size: int | None, interconnect: str | None,
                 network: str | None, gpus_per_node: int | None, cluster: Any,
                 parallel: Any) -> None:
    """Multi-GPU forecasts of each step (forecast.on_clusters(), print(forecast)): checked
    here, before any step runs."""
    forecast.clusters = _cluster_specs(forecast.targets, world_size, interconnect, network,
                                       gpus_per_node, cluster)
    forecast.parallel = parallel
    if forecast.clusters:
        forecast.on_clusters(check=True)
    elif parallel is not None:
        raise ValueError("parallel= needs a cluster: give world_size=N or cluster=habitat.Cluster(...)")


def _cluster_specs(targets: list[str], world_size: int | None, interconnect: str | None,
                   network: str | None, gpus_per_node: int | None, cluster: Any) -> list[Any]:
    """predict_on's multi-GPU arguments as the clusters a Forecast holds."""
    if cluster is not None:
        if world_size is not None or interconnect is not None or network is not None:
            raise ValueError("give either cluster=habitat.Cluster(...) or world_size/interconnect/network, "
                             "not both")
        return list(cluster) if isinstance(cluster, (list, tuple)) else [cluster]
    if world_size is None:
        if interconnect is not None or network is not None or gpus_per_node is not None:
            raise ValueError("interconnect, network and gpus_per_node describe a cluster: also give "
                             "world_size (e.g. world_size=8)")
        return []
    return [{"gpu": t, "world_size": int(world_size), "gpus_per_node": gpus_per_node,
             "interconnect": interconnect, "network": network} for t in targets]
