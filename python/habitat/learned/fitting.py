"""The fitting core of the learned models: feature design per row, the efficiency MLP's training
loop (fit) and error summaries. habitat.learned.train assembles the rows (habitat.learned.sources)
and calls it once per model.

A model predicts a kernel's device time k = t_roof / (E_MAX * sigmoid(mlp(features))). Rows
timed on the device (CUPTI kernel durations) are fitted to k itself; rows timed per call
(NeuSight's, a collection's `Latency`) to the harness's time of k behind a floor fitted per
group of rows (habitat.learned.harness), so the floor never enters the kernel forecast."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from habitat.learned import features as feats
from habitat.learned import harness
from habitat.learned.devices import DeviceTable
from habitat.learned.model import E_MAX, FORMAT, FORMAT_VERSION, EfficiencyMLP
from habitat.learned.neusight import KernelArrays

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class TrainConfig:
    hidden: tuple[int, ...] = (64, 64)
    steps: int = 3000  # AdamW steps (one-cycle schedule); the weights of the best validation step are kept
    batch: int = 512
    lr: float = 2e-3
    weight_decay: float = 1e-4
    seed: int = 0
    max_rows: int = 400000  # per model; larger sets are subsampled (deterministically)
    threads: int = 1  # tiny layers: more threads only add contention
    val_fraction: float = 0.1  # problems of each source held out for early stopping
    eval_every: int = 100
    features: tuple[str, ...] = ()  # the model's inputs, a subset of features.FEATURE_NAMES (empty: all)
    members: int = 1  # independently seeded nets averaged (packed into one MLP: same file format)
    clamp_inputs: bool = False  # prepend the input clamp (_clamp_inputs); off: ReLU extrapolation

    def metadata(self) -> dict:
        """The configuration as a model's JSON records it (`training_config`)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


QUICK = TrainConfig(steps=300, max_rows=4000, eval_every=50)

# Smallest device time of one kernel a model forecasts: on the H100 collection of 2026-11-26 the
# fastest kernels (softmax and layer norm of a few rows) take 1.2-1.5 us of CUPTI device time, and
# 5 % of the softmax rows are under 1.3 us; a floor above that over-forecasts them. (The engine's
# roofline fallback keeps its own, kMinKernelUs in csrc/src/predict/shape_efficiency.h.)
LAUNCH_FLOOR_US = 1.0
# Weight of the size-monotonicity penalty (fit's `pairs`), in the loss's own units (log time).
MONOTONE_WEIGHT = 5.0
# Fraction of a floor group's rows, least work first, whose median time less LAUNCH_FLOOR_US
# starts the group's fitted floor.
FLOOR_QUANTILE = 0.03


def design(rows: KernelArrays, devices: DeviceTable) -> tuple[np.ndarray, np.ndarray]:
    """Features and roofline times for every row (each in its own precision), grouped by device."""
    x = np.zeros((len(rows), len(feats.FEATURE_NAMES[rows.family])))
    t_roof = np.zeros(len(rows))
    for name in np.unique(rows.device):
        idx = np.nonzero(rows.device == name)[0]
        sub = rows.take(idx)
        x[idx], t_roof[idx] = feats.compute(rows.family, sub.shapes, devices.find(name), sub.precision)
    return x, t_roof


def initial_floors(t_meas: np.ndarray, t_roof: np.ndarray, group: np.ndarray) -> np.ndarray:
    """A starting floor (us) for every floor group: the median time of its FLOOR_QUANTILE rows
    with the least work, less one LAUNCH_FLOOR_US kernel (at least 1 us)."""
    n = int(group.max()) + 1 if len(group) and group.max() >= 0 else 0
    out = np.ones(n)
    for g in range(n):
        idx = np.nonzero(group == g)[0]
        if len(idx) == 0:
            continue
        k = max(1, int(np.ceil(FLOOR_QUANTILE * len(idx))))
        least = idx[np.argsort(t_roof[idx], kind="stable")[:k]]
        out[g] = max(float(np.median(t_meas[least])) - LAUNCH_FLOOR_US, 1.0)
    return out


def _clamp_inputs(weights: list[np.ndarray], biases: list[np.ndarray], lo: np.ndarray,
                  hi: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Prepends a layer that clamps each input to [lo, hi], written as plain ReLU layers:
    relu(x - lo) - relu(x - hi) + lo = clamp(x, lo, hi) for lo <= hi, so the file format and
    the engine's MLP stay as they are. A ReLU net extrapolates linearly outside its data; with
    clamped inputs an unseen GPU whose features lie outside gets the efficiency of the nearest
    edge of the data instead."""
    n = len(lo)
    eye = np.eye(n)
    clamp_w = np.concatenate([eye, eye], axis=0)
    clamp_b = np.concatenate([-lo, -hi])
    w1, b1 = weights[0], biases[0]
    return ([clamp_w, np.concatenate([w1, -w1], axis=1)] + weights[1:],
            [clamp_b, b1 + w1 @ lo] + biases[1:])


def _pack_ensemble(ws: list[list[np.ndarray]], bs: list[list[np.ndarray]]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """K nets of equal depth as one MLP: stacked first layers, block-diagonal hidden layers and
    a last layer that averages the K outputs (the mean logit)."""
    k = len(ws)
    if k == 1:
        return ws[0], bs[0]
    out_w = [np.concatenate([w[0] for w in ws], axis=0)]
    out_b = [np.concatenate([b[0] for b in bs])]
    for i in range(1, len(ws[0]) - 1):
        block = np.zeros((sum(w[i].shape[0] for w in ws), sum(w[i].shape[1] for w in ws)))
        r = c = 0
        for w in ws:
            block[r:r + w[i].shape[0], c:c + w[i].shape[1]] = w[i]
            r, c = r + w[i].shape[0], c + w[i].shape[1]
        out_w.append(block)
        out_b.append(np.concatenate([b[i] for b in bs]))
    out_w.append(np.concatenate([w[-1] for w in ws], axis=1) / k)
    out_b.append(np.array([np.mean([b[-1][0] for b in bs])]))
    return out_w, out_b


def model_features(family: str, cfg: TrainConfig) -> tuple[tuple[str, ...], list[int]]:
    """The inputs a model of `family` takes under `cfg` and their columns in the design matrix."""
    every = feats.FEATURE_NAMES[family]
    names = cfg.features or every
    unknown = [n for n in names if n not in every]
    if unknown:
        raise ValueError(f"{family}: unknown features {', '.join(unknown)} (known: {', '.join(every)})")
    return tuple(names), [every.index(n) for n in names]


@dataclass
class FitData:
    """The rows of one fit. A row is one kernel problem; `measurement` names the measured time it
    is part of (rows sharing an id are summed: a traced convolution_backward is its data- and
    weight-gradient passes; None: every row is its own measurement), `scale` multiplies a row's
    time in that sum (None: 1). Per measurement (read from its first row): `t_meas`, the measured
    time; `floor_group`, its harness floor's number (-1: device time, no floor); `val_label`, the
    validation set it belongs to ("" for training: early stopping takes the mean loss over the
    labels); `weight`, its relative chance of being drawn into a batch (None: uniform)."""
    x: np.ndarray
    t_roof: np.ndarray
    t_meas: np.ndarray
    floor_group: np.ndarray
    val_label: np.ndarray
    weight: np.ndarray | None = None
    # Features and roofline times of problems and of the same problems with one dimension
    # doubled, for the size-monotonicity penalty (None: no penalty).
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    measurement: np.ndarray | None = None
    scale: np.ndarray | None = None
    # Per measurement: the number of the source whose kernel times may sit a constant factor off
    # the others' (another machine, another harness), fitted as one log offset per source with
    # the net; -1: a reference source, taken as it is (None: every row).
    offset_group: np.ndarray | None = None

    def parts(self) -> tuple[np.ndarray, np.ndarray]:
        """(first row of each measurement, [measurements, most parts] row indices, -1 padded)."""
        ids = np.arange(len(self.t_meas)) if self.measurement is None else np.asarray(self.measurement)
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        counts = np.bincount(inverse)
        table = np.full((len(first), int(counts.max())), -1, dtype=np.int64)
        slot = np.arange(len(order)) - np.repeat(np.cumsum(counts) - counts, counts)
        table[inverse[order], slot] = order
        return first, table


def fit(family: str, data: FitData, cfg: TrainConfig = TrainConfig()) -> EfficiencyMLP:
    """See _fit. Torch's thread count and deterministic mode are set for the fit and restored
    after it: a process that trains (a test, a notebook) keeps its own settings."""
    import torch

    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:
        return _fit(family, data, cfg)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


_LOG_E_MAX = float(np.log(E_MAX))


@dataclass
class _Normalisation:
    """x' = (x - mean) / std, and the training rows' range of x' (what the input clamp keeps)."""

    mean: np.ndarray
    std: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


@dataclass
class _FitTensors:
    """The measurements kept, as a member's training reads them: per row and per measurement (its
    parts: row indices, -1 padded), the training and validation sets, the penalty's pairs."""

    xs: torch.Tensor
    log_roof: torch.Tensor
    log_scale: torch.Tensor
    parts: torch.Tensor
    log_meas: torch.Tensor
    log_floor0: torch.Tensor
    row_group: torch.Tensor
    timed_per_call: torch.Tensor
    row_offset_group: torch.Tensor
    has_offset: torch.Tensor
    train_idx: torch.Tensor
    draw: torch.Tensor | None
    val_sets: dict[str, torch.Tensor]
    pairs: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None
    floor0: np.ndarray
    n_offsets: int
    ratio: float
    eff0: float


@dataclass
class _MemberFit:
    """One trained member: layers, best step and its validation loss, curve, log floors and factors."""

    weights: list[np.ndarray]
    biases: list[np.ndarray]
    best_step: int
    best_loss: float
    curve: dict[str, list[float]]
    floor_offset: np.ndarray
    source_offset: np.ndarray


def _f32(a: np.ndarray) -> torch.Tensor:
    import torch
    return torch.tensor(a, dtype=torch.float32)


def _kept_measurements(data: FitData, max_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(first row, parts) of each measurement fitted: of a larger set, `max_rows` drawn from `seed`."""
    first, part_table = data.parts()
    if len(first) > max_rows:
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(len(first), max_rows, replace=False))
        first, part_table = first[keep], part_table[keep]
    return first, part_table


def _normalisation(x: np.ndarray, train_rows: np.ndarray) -> tuple[_Normalisation, np.ndarray]:
    """The normalisation by the training rows' mean and standard deviation, and `x` normalised."""
    mean = x[train_rows].mean(axis=0)
    std = x[train_rows].std(axis=0)
    std[std < 1e-6] = 1.0
    xn = (x - mean) / std
    return _Normalisation(mean, std, xn[train_rows].min(axis=0), xn[train_rows].max(axis=0)), xn


def _pair_tensors(pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], cols: list[int],
                  norm: _Normalisation, clamp_inputs: bool) -> tuple[torch.Tensor, ...]:
    """The penalty's pairs as the net reads them (normalised; clamped under the input clamp)."""
    lo, hi = norm.lo, norm.hi
    clip_lo, clip_hi = (lo, hi) if clamp_inputs else (np.full_like(lo, -np.inf), np.full_like(hi, np.inf))
    return (_f32(np.clip((pairs[0][:, cols] - norm.mean) / norm.std, clip_lo, clip_hi)), _f32(np.log(pairs[1])),
            _f32(np.clip((pairs[2][:, cols] - norm.mean) / norm.std, clip_lo, clip_hi)), _f32(np.log(pairs[3])))


def _initial_efficiency(roof: np.ndarray, part_table: np.ndarray, t_meas: np.ndarray, group: np.ndarray) -> float:
    """The median efficiency (summed rooflines `roof` over the measured time) of the device-time
    measurements (or of all) over E_MAX: the start, so the first steps fit the data's shape."""
    roof_sum = np.where(part_table >= 0, roof[np.maximum(part_table, 0)], 0.0).sum(axis=1)
    base = group < 0 if (group < 0).any() else np.ones(len(group), dtype=bool)
    return float(np.clip(np.exp(np.median(np.log(roof_sum[base] / t_meas[base]))) / E_MAX, 1e-6, 0.99))


def _fit_tensors(family: str, data: FitData, cols: list[int], cfg: TrainConfig) -> tuple[_FitTensors, _Normalisation]:
    """The measurements kept and their rows' model columns, as the members' training reads them."""
    import torch
    first, part_table = _kept_measurements(data, cfg.max_rows, cfg.seed)
    x, t_roof = data.x[:, cols], data.t_roof
    scale = np.ones(len(t_roof)) if data.scale is None else np.asarray(data.scale, dtype=np.float64)
    # per measurement
    t_meas, group = data.t_meas[first], data.floor_group[first]
    offset_group = np.full(len(first), -1) if data.offset_group is None else np.asarray(data.offset_group)[first]
    labels = np.asarray(data.val_label)[first]
    floor0 = initial_floors(t_meas, t_roof[first], group)
    val = labels != ""
    norm, xn = _normalisation(x, np.unique(part_table[~val][part_table[~val] >= 0]))
    return _FitTensors(
        xs=_f32(xn), log_roof=_f32(np.log(t_roof)), log_scale=_f32(np.log(scale)), parts=torch.tensor(part_table),
        log_meas=_f32(np.log(t_meas)), log_floor0=_f32(np.log(floor0 if len(floor0) else np.ones(1))),
        row_group=torch.tensor(np.maximum(group, 0)), timed_per_call=torch.tensor(group >= 0),
        row_offset_group=torch.tensor(np.maximum(offset_group, 0)),
        has_offset=torch.tensor((offset_group >= 0).astype(np.float32)), train_idx=torch.tensor(np.nonzero(~val)[0]),
        draw=None if data.weight is None else torch.tensor(data.weight[first][~val], dtype=torch.float64),
        val_sets={str(v): torch.tensor(np.nonzero(labels == v)[0]) for v in np.unique(labels[val])},
        pairs=None if data.pairs is None else _pair_tensors(data.pairs, cols, norm, cfg.clamp_inputs),
        floor0=floor0, n_offsets=int(offset_group.max()) + 1 if (offset_group >= 0).any() else 0,
        ratio=harness.SHAPE_RATIO[family], eff0=_initial_efficiency(t_roof * scale, part_table, t_meas, group),
    ), norm


class _Member:
    """One net of the ensemble, a log floor per floor group and a log factor per source: its loss."""

    def __init__(self, t: _FitTensors, hidden: tuple[int, ...]) -> None:
        import torch
        layers: list[torch.nn.Module] = []
        width = t.xs.shape[1]
        for h in hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
            width = h
        layers.append(torch.nn.Linear(width, 1))
        self.net = torch.nn.Sequential(*layers)
        with torch.no_grad():
            self.net[-1].bias.fill_(float(np.log(t.eff0 / (1.0 - t.eff0))))
        self.floor_offset = torch.zeros(max(len(t.floor0), 1), requires_grad=True)
        self.source_offset = torch.zeros(max(t.n_offsets, 1), requires_grad=True)
        self.t = t

    def log_kernel(self, feat: torch.Tensor, log_roof: torch.Tensor) -> torch.Tensor:
        import torch
        return log_roof - _LOG_E_MAX - torch.nn.functional.logsigmoid(self.net(feat)[:, 0])

    def log_measured_kernels(self, idx: torch.Tensor) -> torch.Tensor:
        """Log of each measurement's summed part times (scaled)."""
        import torch
        t = self.t
        rows = t.parts[idx]
        if rows.shape[1] == 1:
            r = rows[:, 0]
            return self.log_kernel(t.xs[r], t.log_roof[r]) + t.log_scale[r]
        present = rows >= 0
        flat = rows.clamp(min=0).reshape(-1)
        lk = (self.log_kernel(t.xs[flat], t.log_roof[flat]) + t.log_scale[flat]).reshape(rows.shape)
        return torch.logsumexp(torch.where(present, lk, torch.full_like(lk, -1e4)), dim=1)

    def loss(self, idx: torch.Tensor) -> torch.Tensor:
        """The L1 loss on log time of the measurements `idx` (per call: behind their floor)."""
        import torch
        t = self.t
        lk = self.log_measured_kernels(idx) + t.has_offset[idx] * self.source_offset[t.row_offset_group[idx]]
        floor = torch.exp(t.log_floor0[t.row_group[idx]] + self.floor_offset[t.row_group[idx]])
        k = torch.exp(lk)
        called = torch.log(k + floor * (1.0 + t.ratio / (1.0 + k / harness.KNEE_US)))
        pred = torch.where(t.timed_per_call[idx], called, lk)
        return (pred - t.log_meas[idx]).abs().mean()

    def monotone_penalty(self, idx: torch.Tensor) -> torch.Tensor:
        """The mean log-time shortfall of the larger problems of the pairs `idx`."""
        import torch
        assert self.t.pairs is not None
        xa, log_roof_a, xb, log_roof_b = self.t.pairs
        small = self.log_kernel(xa[idx], log_roof_a[idx])
        big = self.log_kernel(xb[idx], log_roof_b[idx])
        return torch.relu(small - big).mean()

    def snapshot(self) -> list[torch.Tensor]:
        return [t.detach().clone() for t in self.net.state_dict().values()] + [self.floor_offset.detach().clone(),
                                                                               self.source_offset.detach().clone()]

    def restore(self, snapshot: list[torch.Tensor]) -> None:
        import torch
        self.net.load_state_dict(dict(zip(self.net.state_dict().keys(), snapshot[:-2])))
        with torch.no_grad():
            self.floor_offset.copy_(snapshot[-2])
            self.source_offset.copy_(snapshot[-1])

    def fitted(self, best_step: int, best_loss: float, curve: dict[str, list[float]]) -> _MemberFit:
        import torch
        linears = [m for m in self.net if isinstance(m, torch.nn.Linear)]
        return _MemberFit([m.weight.detach().numpy().astype(np.float64) for m in linears],
                          [m.bias.detach().numpy().astype(np.float64) for m in linears], best_step, best_loss, curve,
                          self.floor_offset.detach().numpy().astype(np.float64)[:len(self.t.floor0)],
                          self.source_offset.detach().numpy().astype(np.float64)[:self.t.n_offsets])


def _descend(member: _Member, opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LRScheduler,
             gen: torch.Generator, batch: int) -> None:
    """One optimizer step on a batch of training measurements (and of pairs, with the penalty)."""
    import torch
    t = member.t
    n_batch = min(batch, len(t.train_idx))
    if t.draw is None:
        idx = t.train_idx[torch.randint(0, len(t.train_idx), (n_batch,), generator=gen)]
    else:
        idx = t.train_idx[torch.multinomial(t.draw, n_batch, replacement=True, generator=gen)]
    loss = member.loss(idx)
    if t.pairs is not None:
        pidx = torch.randint(0, len(t.pairs[0]), (batch,), generator=gen)
        loss = loss + MONOTONE_WEIGHT * member.monotone_penalty(pidx)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()


def _train_member(t: _FitTensors, cfg: TrainConfig, seed: int) -> _MemberFit:
    """One member trained from `seed`, with the weights of its step of least validation loss."""
    import torch
    torch.manual_seed(seed)
    member = _Member(t, cfg.hidden)
    opt = torch.optim.AdamW([{"params": list(member.net.parameters())},  # no weight decay on the offsets
                             {"params": [member.floor_offset, member.source_offset], "weight_decay": 0.0}],
                            lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.05)
    gen = torch.Generator().manual_seed(seed)
    best = (float("inf"), cfg.steps, member.snapshot())
    curve: dict[str, list[float]] = {g: [] for g in t.val_sets}
    for step in range(1, cfg.steps + 1):
        _descend(member, opt, sched, gen, cfg.batch)
        if t.val_sets and (step % cfg.eval_every == 0 or step == cfg.steps):
            with torch.no_grad():
                per = {g: float(member.loss(i)) for g, i in t.val_sets.items()}
            for g, v in per.items():
                curve[g].append(v)
            loss = float(np.mean(list(per.values())))
            if loss < best[0]:
                best = (loss, step, member.snapshot())
    if not t.val_sets:  # nothing to stop on: the weights of the last step
        best = (float("nan"), cfg.steps, member.snapshot())
    member.restore(best[2])
    return member.fitted(best[1], best[0], curve)


def _metadata(family: str, names: tuple[str, ...], cfg: TrainConfig, t: _FitTensors, members: list[_MemberFit],
              layers: int) -> dict:
    """The model's JSON metadata: its format, inputs and output, and the fit's early stopping,
    validation curve, floors and source factors (the members' mean)."""
    curve = {g: [float(v) for v in np.mean([m.curve[g] for m in members], axis=0)] for g in t.val_sets}
    floors = t.floor0 * np.exp(np.mean([m.floor_offset for m in members], axis=0)) if len(t.floor0) else t.floor0
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "family": family, "layers": layers,
        "input_clamp": ("layer 0 clamps each normalised feature to its training range "
                        "(relu(x - lo) - relu(x - hi) + lo), so the model does not extrapolate")
                       if cfg.clamp_inputs else "none: the ReLU net extrapolates linearly outside its data",
        "hidden": list(cfg.hidden), "members": cfg.members, "activation": "relu", "e_max": E_MAX,
        "launch_floor_us": LAUNCH_FLOOR_US,
        "features": list(names),
        "shape_columns": list(feats.SHAPE_COLUMNS[family]),
        "normalisation": "x' = (x - norm.mean) / norm.std (tensors in the .safetensors file)",
        "output": "time_us = max(launch_floor_us, roofline_us / (e_max * sigmoid(y)))",
        "early_stopping": {"best_step": [m.best_step for m in members],
                           "validation_loss": float(np.mean([m.best_loss for m in members])) if t.val_sets else None,
                           "validation_measurements": sum(len(i) for i in t.val_sets.values())},
        "validation_curve": {"every": cfg.eval_every, "loss": curve},
        "floors_us": [float(v) for v in floors],
        "source_factors": [float(v) for v in np.exp(np.mean([m.source_offset for m in members], axis=0))]
        if t.n_offsets else []}


def _fit(family: str, data: FitData, cfg: TrainConfig) -> EfficiencyMLP:
    """Fits k = t_roof / (E_MAX * sigmoid(mlp(x))) with an L1 loss on log time (a relative-error
    loss): device-time rows against k, per-call rows against harness.harness_time(F, k) with one
    floor F per floor group, fitted with the net (log F starts at initial_floors; no weight
    decay on it); a measurement of an offset group against k times its group's fitted factor
    (metadata["source_factors"]). The weights of the step with the least validation loss (the mean over the
    validation labels) are kept; metadata["floors_us"] holds each group's fitted floor.
    `data.pairs` adds MONOTONE_WEIGHT x the log-time shortfall wherever the problem with one
    dimension doubled comes out faster than the problem itself (time should not fall as a
    problem grows)."""
    import torch

    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True)
    names, cols = model_features(family, cfg)
    t, norm = _fit_tensors(family, data, cols, cfg)
    members = [_train_member(t, cfg, cfg.seed + 1000 * i) for i in range(cfg.members)]
    weights, biases = _pack_ensemble([m.weights for m in members], [m.biases for m in members])
    if cfg.clamp_inputs:
        weights, biases = _clamp_inputs(weights, biases, norm.lo, norm.hi)
    return EfficiencyMLP(
        family, norm.mean.astype(np.float32), norm.std.astype(np.float32),
        [w.astype(np.float32) for w in weights], [b.astype(np.float32) for b in biases],
        _metadata(family, names, cfg, t, members, len(weights)))


def source_weights(source: np.ndarray, shares: dict[str, float]) -> np.ndarray:
    """Per-row sample weights giving each source its share of the draws (renormalised over the
    sources present; each source's rows equal among themselves)."""
    present = {s: shares[s] for s in np.unique(source)}
    total = sum(present.values())
    out = np.zeros(len(source))
    for s, share in present.items():
        mask = source == s
        out[mask] = share / total / mask.sum()
    return out


def ape(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(pred - meas) / meas * 100.0


def summary(errors: np.ndarray) -> dict[str, float]:
    if len(errors) == 0:
        return {"n": 0}
    return {"n": int(len(errors)), "mean": float(np.mean(errors)), "median": float(np.median(errors)),
            "p90": float(np.percentile(errors, 90))}


def gpu_dir_name(gpu: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", gpu)


def _log(text: str) -> None:
    print(text, flush=True)
