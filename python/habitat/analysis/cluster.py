"""Clusters of GPUs and the time of one collective on them (the engine's collective model).

A :class:`Cluster` is `world_size` GPUs of one kind, `gpus_per_node` to a node joined by an
intra-node fabric (NVLink/NVSwitch or PCIe), nodes joined by one NIC per GPU (InfiniBand or
Ethernet). Unset parts come from the GPU's usual server in devices.json's ``interconnects``
section, where every bandwidth, efficiency and latency cites its source.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from habitat import _engine
from habitat.data import devices as _devices
from habitat.data.devices import PACKAGED_DEVICES, get_device

#: The collectives the engine models (nccl-tests' names).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "send_recv",
               "all_to_all")


@functools.lru_cache(maxsize=None)
def _interconnects(extra: tuple[str, ...]) -> Any:
    texts = [PACKAGED_DEVICES.read_text()]
    texts += [open(p).read() for p in extra]
    return _engine.Interconnects.from_documents(texts)


def interconnects() -> Any:
    """The fabric database: the packaged devices.json, then the device files of
    HABITAT_DEVICES and habitat.load_devices (their "interconnects" sections add or override
    tiers and servers, as their "devices" do GPUs)."""
    # the same files, in the same order, as the GPU database (habitat.data.devices._load)
    extra = tuple([*_devices._env_files(), *_devices._user_files])
    try:
        return _interconnects(extra)
    except _engine.ClusterError as exc:
        raise ValueError(f"{exc} (in {', '.join(extra) or 'the packaged devices.json'})") from None


def interconnect_names() -> list[str]:
    return list(interconnects().link_names())


@dataclass(frozen=True)
class Cluster:
    """`world_size` GPUs named `gpu` (forgiving names, as everywhere).

    `interconnect` sets the intra-node fabric ("nvlink", "pcie", or a tier name such as
    "nvlink4-nvswitch"); `network` the node-to-node one ("infiniband", "ethernet", "ib-ndr400").
    """

    gpu: str
    world_size: int = 1
    gpus_per_node: int | None = None
    interconnect: str | None = None
    network: str | None = None

    def __post_init__(self) -> None:
        if int(self.world_size) < 1:
            raise ValueError(f"world_size must be at least 1, got {self.world_size}")
        object.__setattr__(self, "gpu", get_device(self.gpu).name)
        self.engine  # noqa: B018  (bad input fails here, with the engine's message)

    @functools.cached_property
    def engine(self) -> Any:
        return interconnects().make_cluster(self.gpu, int(self.world_size), self.gpus_per_node,
                                            self.interconnect, self.network)

    @property
    def nodes(self) -> int:
        return self.engine.nodes

    @property
    def per_node(self) -> int:
        return self.engine.gpus_per_node

    @property
    def intra(self) -> dict[str, Any]:
        return self.engine.intra

    @property
    def inter(self) -> dict[str, Any]:
        return self.engine.inter

    def label(self) -> str:
        """e.g. "8x H100-SXM5-80GB (nvlink4-nvswitch)" or "16x A100 (2 nodes, ..., ib-hdr200)"."""
        head = f"{self.world_size}x {self.gpu}"
        if self.nodes == 1:
            return f"{head} ({self.intra['name']})" if self.world_size > 1 else head
        return f"{head} ({self.nodes} nodes of {self.per_node}, {self.intra['name']}, {self.inter['name']})"

    def group(self, size: int, stride: int = 1) -> "Cluster":
        """The cluster one process group of `size` ranks, `stride` ranks apart, sees: with
        stride s only gpus_per_node / s of its ranks share a node."""
        if size < 1 or size * stride > self.world_size:
            raise ValueError(f"a group of {size} ranks {stride} apart does not fit {self.label()}")
        per_node = max(1, self.per_node // stride)
        per_node = min(per_node, size)
        while size % per_node:
            per_node -= 1
        return Cluster(self.gpu, size, per_node, self.intra["name"], self.inter["name"])

    def collective(self, kind: str, nbytes: float, ranks: int | None = None,
                   algorithm: str = "auto") -> dict[str, Any]:
        """Time (us), algbw and busbw (GB/s), algorithm, NCCL protocol (LL, LL128, Simple) and
        bottleneck tier of one collective of `nbytes` (nccl-tests' size) over `ranks` consecutive
        ranks (default: all)."""
        return self.engine.collective(kind, float(nbytes), ranks, algorithm)

    def collective_us(self, kind: str, nbytes: float, ranks: int | None = None) -> float:
        return self.collective(kind, nbytes, ranks)["time_us"]
