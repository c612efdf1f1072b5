"""What inductor made of a graph: its aten nodes, the kernels it generated and what they fuse.

Works on the post-grad FX graph inductor lowered (node shapes and dtypes from the FakeTensors in
``node.meta["val"]``) and on inductor's kernel provenance (kernel name -> the post-grad nodes it
was generated from, ``torch._inductor.debug``). Pure bookkeeping: nothing here runs at step time.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import torch
from torch import fx

#: Generated kernels are defined in inductor's output module as ``name = async_compile.kind(``;
#: anything else it calls (extern_kernels.mm, aten ops, fallbacks) goes through the dispatcher.
_KERNEL_DEFINITION = re.compile(r"^(\w+) = async_compile\.\w+\(", re.MULTILINE)
#: Kernels named by inductor's templates (GEMM/conv epilogues): triton_tem_*, cpp template.
_TEMPLATE_NAME = re.compile(r"(^|_)tem(_|$)|_template")

_MATRIX_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution",
                         "convolution_backward", "_scaled_mm"})


@dataclass(frozen=True)
class Buffer:
    """A tensor a kernel reads or writes, as inductor planned it (compile-time shapes)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    @property
    def contiguous(self) -> bool:
        expected, step = [], 1
        for size in reversed(self.shape):
            expected.append(step)
            step *= max(size, 1)
        return tuple(reversed(expected)) == self.strides

    def spec(self) -> str:
        """The text form fused kernel records carry (see csrc/src/cost/fused_cost.h)."""
        text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        return text if self.contiguous else text + f"({','.join(map(str, self.strides))})"


@dataclass(frozen=True)
class NodeInfo:
    """One aten node of a compiled graph."""

    name: str
    op: str                      # "aten::mul.Tensor"
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]


@dataclass(frozen=True)
class FusedKernel:
    """A kernel inductor generated, with the aten nodes it computes."""

    name: str                    # "cpp_fused_gelu_0", "triton_poi_fused_gelu_0"
    kind: str                    # "pointwise" | "reduction" | "template" | "unknown"
    source_nodes: tuple[str, ...]
    source_ops: tuple[str, ...]  # aten op names of source_nodes, in the same order
    reads: tuple[Buffer, ...]
    writes: tuple[Buffer, ...]
    flops: float
    #: What the source ops would move run one by one (each reads its inputs, writes its
    #: output): the fused kernel's bytes are at most this.
    eager_bytes: int = 0

    @property
    def bytes(self) -> int:
        return sum(_span_bytes(b) for b in self.reads + self.writes)


@dataclass(frozen=True)
class ExternCall:
    """A call inductor left to an aten kernel (captured by the dispatcher at run time)."""

    name: str                    # "extern_kernels.mm", "aten.convolution_backward"
    source_nodes: tuple[str, ...]


@dataclass
class CompiledGraph:
    """One graph inductor compiled: forward, backward or inference."""

    graph_id: int
    kind: str                              # "forward" | "backward" | "inference" | "optimizer"
    nodes: list[NodeInfo] = field(default_factory=list)
    kernels: list[FusedKernel] = field(default_factory=list)
    externs: list[ExternCall] = field(default_factory=list)

    @property
    def region(self) -> str:
        return f"compiled/graph_{self.graph_id}"


# ----- tensors -------------------------------------------------------------------------------
def _int(x: Any) -> int:
    """A concrete size: symbolic sizes (dynamic shapes) read as the hint they compiled for."""
    if isinstance(x, int):
        return x
    node = getattr(x, "node", None)
    hint = getattr(node, "hint", None)
    if hint is not None:
        return int(hint)
    return int(x)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _tensor(val: Any) -> torch.Tensor | None:
    return val if isinstance(val, torch.Tensor) else None


def _buffer(val: torch.Tensor) -> Buffer:
    return Buffer(tuple(_int(s) for s in val.shape), tuple(_int(s) for s in val.stride()),
                  _dtype_name(val.dtype))


def _numel(val: torch.Tensor) -> int:
    n = 1
    for s in val.shape:
        n *= _int(s)
    return n


def _span_bytes(b: Buffer) -> int:
    if any(s == 0 for s in b.shape):
        return 0
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(b.shape, b.strides))
    numel = 1
    for s in b.shape:
        numel *= s
    return min(span, numel) * torch.empty((), dtype=getattr(torch, b.dtype)).element_size()


def _vals(node: fx.Node) -> list[torch.Tensor]:
    val = node.meta.get("val")
    if isinstance(val, (list, tuple)):
        return [v for v in val if isinstance(v, torch.Tensor)]
    return [val] if isinstance(val, torch.Tensor) else []


def _op_name(node: fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        ns, _, rest = target.name().partition("::")
        return f"{ns}::{rest}"
    return getattr(target, "__name__", str(target))


def _is_view(node: fx.Node) -> bool:
    target = node.target
    if target is operator.getitem:
        return False
    if isinstance(target, torch._ops.OpOverload):
        if target.is_view:
            return True
        return target.overloadpacket in (torch.ops.aten.reshape, torch.ops.aten._reshape_alias)
    return False


def _written_args(node: fx.Node) -> list[fx.Node]:
    """Arguments a mutating op writes in place (copy_, index_put_, ...)."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or not target._schema.is_mutable:
        return []
    out = []
    for arg, value in zip(target._schema.arguments, node.args):
        if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, fx.Node):
            out.append(value)
    return out


# ----- graph ---------------------------------------------------------------------------------
def describe_nodes(gm: fx.GraphModule) -> list[NodeInfo]:
    """Every aten call of the graph with its output shapes and dtypes."""
    nodes = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        vals = _vals(node)
        nodes.append(NodeInfo(node.name, _op_name(node),
                              tuple(tuple(_int(s) for s in v.shape) for v in vals),
                              tuple(_dtype_name(v.dtype) for v in vals)))
    return nodes


def node_flops(node: fx.Node) -> float:
    """FLOPs of one aten node: torch's own formulas for matrix work (GEMM, conv, attention);
    one per element of the larger of its output and inputs for the rest (point-wise ops count
    once per output element, reductions once per input element). Views cost nothing."""
    if node.op != "call_function" or _is_view(node) or node.target is operator.getitem:
        return 0.0
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        from torch.utils.flop_counter import flop_registry

        formula = flop_registry.get(target.overloadpacket)
        if formula is not None:
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs),
                                                 lambda n: n.meta.get("val"))
            try:
                return float(formula(*args, **kwargs, out_val=node.meta.get("val")))
            except Exception:  # a formula that does not take this overload: count elements
                pass
    sizes = [_numel(v) for v in _vals(node)]
    for arg in node.all_input_nodes:
        sizes.extend(_numel(v) for v in _vals(arg))
    return float(max(sizes, default=0))


def _is_reduction(node: fx.Node) -> bool:
    if _is_view(node) or node.op != "call_function":
        return False
    outs = [_numel(v) for v in _vals(node)]
    ins = [_numel(v) for a in node.all_input_nodes for v in _vals(a)]
    return bool(outs and ins) and max(outs) < max(ins)


def _kernel_group(gm: fx.GraphModule, source_names: Sequence[str]) -> list[fx.Node]:
    """The aten calls of `gm` named in `source_names`, in their order (names not in the graph
    left out)."""
    by_name = {n.name: n for n in gm.graph.nodes}
    return [by_name[s] for s in source_names if s in by_name
            and by_name[s].op == "call_function"]


def _escapes(node: fx.Node, members: set[fx.Node]) -> bool:
    """`node`'s value is used outside the group `members` (or returned), looking through views."""
    for user in node.users:
        if user.op == "output" or user not in members:
            return True
        if (_is_view(user) or user.target is operator.getitem) and _escapes(user, members):
            return True
    return False


def _group_reads(group: list[fx.Node], members: set[fx.Node]) -> list[fx.Node]:
    """The distinct tensors produced outside the group that its nodes consume, in first use."""
    reads: dict[fx.Node, None] = {}
    for node in group:
        for arg in node.all_input_nodes:
            if arg not in members and _vals(arg):
                reads.setdefault(arg)
    return list(reads)


def _group_writes(group: list[fx.Node], members: set[fx.Node]) -> list[fx.Node]:
    """The group's results used outside it, and the tensors it mutates in place; a multi-output
    node writes the results its getitem users take out."""
    writes: dict[fx.Node, None] = {}
    for node in group:
        for target in _written_args(node):
            writes.setdefault(target)
        if _is_view(node) or len(_vals(node)) != 1 or not isinstance(node.meta.get("val"),
                                                                      torch.Tensor):
            continue
        if _escapes(node, members):
            writes.setdefault(node)
    for node in group:
        if isinstance(node.meta.get("val"), (list, tuple)):
            for user in node.users:
                if user.target is operator.getitem and _escapes(user, members):
                    writes.setdefault(user)
    return list(writes)


def _kernel_kind(name: str, group: list[fx.Node]) -> str:
    """"template" (a GEMM or convolution, or a kernel named by inductor's templates),
    "reduction" or "pointwise"."""
    stems = {n.target.overloadpacket.__name__ for n in group
             if isinstance(n.target, torch._ops.OpOverload)}
    if _TEMPLATE_NAME.search(name) or stems & _MATRIX_OPS:
        return "template"
    if any(_is_reduction(n) for n in group):
        return "reduction"
    return "pointwise"


def fused_kernel(gm: fx.GraphModule, name: str, source_names: Sequence[str]) -> FusedKernel:
    """The kernel `name` computing the nodes `source_names` of `gm`.

    Reads are the distinct tensors produced outside the group that its nodes consume; writes
    are the group's results used outside it (or returned), plus tensors it mutates in place.
    Views inside the group are looked through. Values that never leave the group were fused
    away and move no bytes."""
    group = _kernel_group(gm, source_names)
    members = set(group)
    if not group:
        return FusedKernel(name, "unknown", tuple(source_names), (), (), (), 0.0)
    reads = _group_reads(group, members)
    writes = _group_writes(group, members)
    ops = tuple(_op_name(n) for n in group)
    return FusedKernel(
        name=name, kind=_kernel_kind(name, group), source_nodes=tuple(n.name for n in group), source_ops=ops,
        reads=tuple(_buffer(v) for n in reads for v in _vals(n)[:1]),
        writes=tuple(_buffer(v) for n in writes for v in _vals(n)[:1]),
        flops=sum(node_flops(n) for n in group),
        eager_bytes=sum(_eager_bytes(n) for n in group))


def _eager_bytes(node: fx.Node) -> int:
    """Bytes `node` moves as an eager op: its distinct tensor inputs read, its outputs written."""
    if _is_view(node) or node.target is operator.getitem:
        return 0
    tensors = [v for a in dict.fromkeys(node.all_input_nodes) for v in _vals(a)[:1]]
    tensors += _vals(node)
    return sum(_span_bytes(_buffer(v)) for v in tensors)


def generated_kernel_names(source_code: str) -> set[str]:
    """Names of the kernels inductor generated in an output module's source."""
    return set(_KERNEL_DEFINITION.findall(source_code))


def map_graph(graph_id: int, kind: str, gm: fx.GraphModule, source_code: str,
              provenance: Mapping[str, Iterable[str]]) -> CompiledGraph:
    """Splits inductor's kernels into generated (fused) ones and extern calls.

    `provenance` maps "kernel_name:handle" (handles number the kernels in launch order) to the
    post-grad node names each was generated from."""
    generated = generated_kernel_names(source_code)
    entries = []
    for key, nodes in provenance.items():
        name, _, handle = key.rpartition(":")
        if not name:
            name, handle = key, "0"
        entries.append((int(handle) if handle.isdigit() else 0, name, list(nodes)))
    entries.sort(key=lambda e: e[0])
    graph = CompiledGraph(graph_id, kind, describe_nodes(gm))
    seen = set()
    for _, name, nodes in entries:
        if name in generated:
            graph.kernels.append(fused_kernel(gm, name, nodes))
            seen.add(name)
        else:
            graph.externs.append(ExternCall(name, tuple(nodes)))
    # Kernels without provenance still run: they are recorded, flagged as not modelled.
    for name in sorted(generated - seen):
        graph.kernels.append(FusedKernel(name, "unknown", (), (), (), (), 0.0))
    return graph
