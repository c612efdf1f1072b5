"""Measures GPU kernels per op family and precision and writes NeuSight-like CSVs
(<stem>_<precision>.csv) for training the learned models beyond FP32 and beyond NeuSight's GPUs.
The entry point of the modules beside it: kernel_families.py (the families), kernel_shapes.py and
network_shapes.py, cases_*.py, kernel_measure.py, kernel_trace.py, kernel_rows.py.

    python benchmarks/gpu/collect_kernels.py --out benchmarks/results/kernels/<gpu> [--budget-s 540]
    python benchmarks/gpu/collect_kernels.py --out DIR --families gconv,batchnorm --budget-s 240
    python benchmarks/gpu/collect_kernels.py --device cpu --dry-run --out /tmp/kernels   # smoke test

Families (--families, comma-separated, default all; files; shape columns):
- gemm: bmm and linear in fp32, tf32, bf16, fp16; bmm_*, linear_*; B, M, N, K (A[B,M,N] x B[B,N,K],
  N the reduction, as NeuSight);
- conv: fwd, bwd_data, bwd_weight in fp32 (TF32 off: SIMT kernels), tf32 (cuDNN's default for
  fp32 tensors) and bf16, the tensor-core precisions both NCHW and channels-last; conv_*;
  B, Input_Channel, Output_Channel, Kernel_Szie, Input_Size, Stride, Padding, Layout;
- gconv: grouped and depthwise convolutions, as conv; gconv_* (OPName gconv); conv's columns
  and Groups (depthwise: Groups == Input_Channel == Output_Channel);
- pointwise: 1x1 convolutions, as conv; conv1x1_* (OPName conv: dense conv rows); conv's columns;
- stem: patch embeddings (filter = stride, 1-6 image channels) and 4x4 stride-2 filters, as conv;
  convstem_* (OPName conv); conv's columns;
- attention: F.scaled_dot_product_attention forced to each SDPA backend (flash, efficient, cudnn,
  math where this torch has it); fwd and fwd+bwd; causal and not; bf16, fp16, fp32; sdpa_*;
  B, H, L, S, E, Causal, Backend;
- batchnorm: training mode, fwd and fwd+bwd, NCHW and channels-last, fp32 or bf16 input with
  fp32 parameters (as under autocast); bn_*; B, Input_Channel, Input_Size, Layout;
- elementwise (add, mul, div, addu, mulu, relu, gelu, tanh: NeuSight's ops; <op>_*), activation
  (relu, relu6, gelu, gelu_tanh, silu, hardswish, hardsigmoid, sigmoid, tanh, fwd and the aten
  backward op, bwd; activation_*), layernorm (ln fwd, bwd; ln_*), rmsnorm (torch's fused RMS
  norm, rms fwd, bwd; rms_*), softmax (fwd, bwd; softmax_*), reduction (sum and mean over the
  last or the first dimension; sum_*, mean_*; Dim), largenorm (ln, rms and softmax on 2^25 to
  2^29 elements, rows of a model's width; ln_large_*, rms_large_*, softmax_large_*): B x H
  tensors (B, H), in fp32 and bf16;
- embedding: F.embedding fwd and aten.embedding_dense_backward bwd; embedding_*; Vocab, Dim, Tokens;
- crossentropy: F.cross_entropy fwd and fwd+bwd, and its aten parts log_softmax and nll_loss, fwd
  and bwd; crossentropy_*; Tokens, Classes;
- adamw: one AdamW step over a list of parameters, fused and foreach (Impl), parameters in fp32
  or bf16; adamw_*; Tensors, Elements, Largest, Chunks, Impl;
- netgemm: gemm's cases at transformer layers' shapes (widths 512-4096, multiples of 128; tokens
  1024-16384; the three passes of the QKV, output and feed-forward layers, and attention's bmm);
  gemmnet_* (OPName linear, bmm); gemm's columns;
- multitensor: the other multi-tensor kernels of a step over such lists: an SGD step with
  momentum (OPName sgd; fused and foreach), GradScaler's unscale (amp_unscale, fp32) and
  clip_grad_norm_ with foreach (clip_grad_norm); multitensor_*; adamw's columns;
- encoder: attention's cases for encoders' self-attention (sequences of 49-577 tokens, 8-16
  heads of 64), not causal, plain (OPName sdpa), with a padding mask (sdpa_mask) and with
  training's attention dropout, p = 0.1 (sdpa_dropout); sdpa_enc_*; attention's columns, Mask
  and Dropout;
- conv3d: 3-D convolutions by cube filters (video and volumetric networks), as conv ("nhwc":
  channels_last_3d); conv3d_* (OPName conv3d); conv's columns and Depth (frames).
- vocab: a language-model head's GEMMs, as gemm's linear rows with a vocabulary (real ones and
  drawn ones, most not a multiple of 8) as the output or the reduction; linearvocab_* (OPName
  linear); gemm's columns.
Shapes are drawn per family from --seed (the same shapes whatever else runs); the new families
draw a third of them from real networks' layers (network_shapes.py). --budget-s is split
between the selected families (time a family leaves unused goes to the next), so every selected
family is reached. Files already in --out are kept: rows of a file this run also writes are
appended to (another --seed measures other shapes).

Per pass of shapes (as many as --batch and the device's memory allow): each case is warmed up
first (cuDNN's autotuner, with cudnn.benchmark on, tries its candidate kernels here); then one
torch.profiler pass runs each case --profiled-runs times, each run followed by a synchronize:
the kernels of those runs alone (launched from any thread: autograd's backward included) give
the kernel columns (the longest kernel per op is reported, as NeuSight does, and the distinct
kernels of a run in `Kernels`) and `Kernel Latency`, the median over the runs of the summed
durations of the case's kernels (ms, CUPTI's device time: no launch gaps, no host time, so no
harness floor), and `Transform Latency`, the same for cuDNN's NCHW<->NHWC layout transform
kernels alone; then CUDA events time the case (`Latency`, ms): median of --repeats runs,
NeuSight's method (host launch included). Columns follow NeuSight's plus `Precision`, `Phase`,
the two kernel columns and the shape.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Iterable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_families import FAMILIES  # noqa: E402  (the collector's modules are beside it)
from kernel_measure import device_memory_full, measure, next_pass  # noqa: E402
from kernel_rows import read_rows, write_rows  # noqa: E402

COUNT_OPTIONS = ("gemm", "conv", "attention", "memory")


# ----- options --------------------------------------------------------------------------------
def parse_families(text: str) -> tuple[str, ...]:
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown families {', '.join(unknown) or '(none given)'}; choose from {','.join(FAMILIES)}")
    return tuple(dict.fromkeys(names))  # in the order given, once each


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--families", type=parse_families, default=tuple(FAMILIES),
                   help=f"comma-separated subset of {','.join(FAMILIES)} (default: all)")
    p.add_argument("--dry-run", action="store_true", help="a handful of small shapes (smoke test)")
    p.add_argument("--gemm", type=int, default=1200, help="GEMM shapes (each in 4 precisions)")
    p.add_argument("--conv", type=int, default=300,
                   help="shapes per conv family (conv, gconv, pointwise: fwd + 2 bwd, each in the precisions "
                        "and layouts of cases_conv.CONV_VARIANTS)")
    p.add_argument("--attention", type=int, default=200,
                   help="attention shapes (each: backends x precisions x causal x fwd, fwd+bwd)")
    p.add_argument("--memory", type=int, default=300,
                   help="shapes per family of the others (each in its ops, phases and precisions)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10, help="CUDA-event timings per case (Latency)")
    p.add_argument("--profiled-runs", type=int, default=5,
                   help="runs per case in the profiler pass (Kernel Latency: their median)")
    p.add_argument("--budget-s", type=float, default=840.0,
                   help="total time; split between the families, no new pass of shapes past it")
    p.add_argument("--batch", type=int, default=16, help="shapes per profiler pass (at most)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.dry_run:
        args.gemm, args.conv, args.attention, args.memory = 4, 2, 2, 2
        args.warmup, args.repeats, args.profiled_runs, args.batch = 1, 3, 2, 4
    return args


def family_budget(remaining_s: float, family: str, left: Iterable[str]) -> float:
    """This family's share of the time still left, `left` being it and the families after it."""
    total = sum(FAMILIES[f].weight for f in left)
    return max(0.0, remaining_s) * FAMILIES[family].weight / total if total > 0 else 0.0


def family_rng(seed: int, family: str) -> random.Random:
    """Each family's own generator: its shapes do not depend on which families run before it."""
    return random.Random(f"{seed}/{family}")


# ----- the run --------------------------------------------------------------------------------
def environment(device: str) -> tuple[dict[str, Any], int]:
    """The rows' device and version columns, and the device's SM count."""
    cuda = device == "cuda"
    meta = {"Device": torch.cuda.get_device_name() if cuda else "cpu", "Torch Version": torch.__version__,
            "CUDNN Version": torch.backends.cudnn.version() if cuda else "", "CUDA Version": torch.version.cuda or ""}
    return meta, torch.cuda.get_device_properties(0).multi_processor_count if cuda else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run on a GPU machine, or use --device cpu --dry-run for a smoke test")
    torch.backends.cudnn.benchmark = True
    meta, sms = environment(args.device)
    out = Path(args.out)
    kept = read_rows(out) if out.is_dir() else {}
    if kept:
        print(f"{out}: keeping the {sum(map(len, kept.values()))} rows of its {len(kept)} files", flush=True)
    memory_full = device_memory_full(args.device)
    start = time.time()
    rows: dict[str, list[dict[str, Any]]] = {}
    families = list(args.families)
    for i, name in enumerate(families):
        family, t_family = FAMILIES[name], time.time()
        budget = family_budget(args.budget_s - (t_family - start), name, families[i:])
        deadline = t_family + budget
        pending = family.shapes(getattr(args, family.count), family_rng(args.seed, name), args.dry_run)
        per_pass = max(1, args.batch // family.pass_divisor)
        measured = failed = 0
        while pending and time.time() < deadline:
            cases, pending, bad = next_pass(pending, partial(family.cases, device=args.device), per_pass,
                                            memory_full)
            failed += bad
            for file, row in measure(cases, args.device, args.warmup, args.repeats, meta, sms, deadline,
                                     args.profiled_runs):
                rows.setdefault(file, []).append(row)
                measured += 1
            del cases
            if args.device == "cuda":
                torch.cuda.empty_cache()
            write_rows(out, rows, kept)  # after every pass: a run cut short keeps what it measured
        print(f"{name}: {measured} measurements in {time.time() - t_family:.0f} s (budget {budget:.0f} s, "
              f"{len(pending)} shapes left, {failed} failed to build)", flush=True)
    total = sum(len(r) for r in rows.values())
    print(f"{total} measurements in {time.time() - start:.0f}s -> {args.out} ({', '.join(sorted(rows))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
