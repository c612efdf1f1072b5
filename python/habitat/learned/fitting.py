"""The fitting core of the learned models: feature design per row, the harness-floor model,
the efficiency MLP's training loop (fit) and error summaries. Used by habitat.learned.train (the
NeuSight trainer and the CLI) and habitat.learned.train_precision (NeuSight plus measured
precisions); see habitat.learned.train for the method."""
from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Set
from dataclasses import dataclass

import numpy as np

from habitat.learned import features as feats
from habitat.learned.devices import DeviceTable
from habitat.learned.model import E_MAX, FORMAT, FORMAT_VERSION, EfficiencyMLP, soft_max
from habitat.learned.neusight import KernelArrays


@dataclass(frozen=True)
class TrainConfig:
    hidden: tuple[int, ...] = (64, 64)
    steps: int = 1500  # AdamW steps (one-cycle schedule); each model stops at the step its GPU folds pick
    batch: int = 1024
    lr: float = 3e-3
    weight_decay: float = 1e-4
    seed: int = 0
    max_rows: int = 150000  # per model; larger sets are subsampled (deterministically)
    threads: int = 1  # tiny layers: more threads only add contention
    val_fraction: float = 0.1  # shapes of the training rows held out for early stopping
    eval_every: int = 50
    floor_sharpness: float = 4.0  # p of the harness soft maximum (floor^p + kernel^p)^(1/p)
    ignore_features: tuple[str, ...] = ()  # inputs the model may not use (first-layer weights 0)
    features: tuple[str, ...] = ()  # the model's inputs, a subset of features.FEATURE_NAMES (empty: all)
    members: int = 1  # independently seeded nets averaged (packed into one MLP: same file format)
    clamp_inputs: bool = True  # prepend the input clamp (_clamp_inputs); off: ReLU extrapolation

    def metadata(self) -> dict:
        """The configuration as a model's JSON records it (`training_config`)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


QUICK = TrainConfig(steps=300, max_rows=4000)

# Smallest device time of one kernel on a real GPU (the engine's kMinKernelUs in
# csrc/shape_efficiency.h). NVIDIA's "Getting Started with CUDA Graphs" (developer.nvidia.com/
# blog/cuda-graphs, 2019) measures a short kernel at ~2.9 us of execution and 3.4-3.8 us per
# kernel when launched back to back on V100; an empty kernel's device time is lower.
LAUNCH_FLOOR_US = 2.0
# The floor fitted under a row timed as device time (CUPTI kernel durations: the recorded traces,
# a kernel collection's `Kernel Latency`): negligible against any kernel, i.e. none.
DEVICE_TIME_FLOOR_US = 1e-3
# Weight of the size-monotonicity penalty (fit's `grown`), in the loss's own units (log time).
MONOTONE_WEIGHT = 5.0
# Fraction of each (GPU, op)'s rows, smallest rooflines first, whose median measured time is
# that harness's per-call floor (NeuSight's rows flatten at 25-60 us below a few us of work).
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


def floor_key(op: str, precision: str) -> str:
    """The harness floor's key: the op for FP32 rows (NeuSight's are all FP32), `op:precision`
    otherwise (the host's per-call overhead differs per precision: other cuBLAS/cuDNN paths)."""
    return op if precision == "fp32" else f"{op}:{precision}"


def floor_keys(rows: KernelArrays) -> np.ndarray:
    return np.array([floor_key(o, p) for o, p in zip(rows.op, rows.precision)], dtype=object)


def harness_floors(rows: KernelArrays, t_roof: np.ndarray) -> dict[str, dict[str, float]]:
    """Per floor key (op, and precision unless FP32: floor_key) and GPU: the median measured
    time of the rows with the least work (the FLOOR_QUANTILE smallest rooflines), i.e. the
    measurement harness's per-call floor."""
    out: dict[str, dict[str, float]] = {}
    keys = floor_keys(rows)
    for op in sorted(np.unique(keys).tolist()):
        for gpu in sorted(np.unique(rows.device).tolist()):
            idx = np.nonzero((keys == op) & (rows.device == gpu))[0]
            if len(idx) == 0:
                continue
            n = max(1, int(np.ceil(FLOOR_QUANTILE * len(idx))))
            least = idx[np.argsort(t_roof[idx], kind="stable")[:n]]
            out.setdefault(op, {})[gpu] = float(np.median(rows.latency_us[least]))
    return out


def row_floors(rows: KernelArrays, floors: dict[str, dict[str, float]]) -> np.ndarray:
    """Each row's floor: its floor key's on its GPU, or its op's (weights trained before the
    floors were split by precision have one per op)."""
    return np.array([(floors[k] if k in floors else floors[o])[g]
                     for k, o, g in zip(floor_keys(rows), rows.op, rows.device)])


def _split(n: int, groups: np.ndarray | None, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Validation mask: a fraction of the groups (shapes), or of the rows without groups."""
    if fraction <= 0 or n < 20:
        return np.zeros(n, dtype=bool)
    if groups is None:
        return rng.random(n) < fraction
    unique = np.unique(groups)
    chosen = rng.choice(unique, max(1, int(len(unique) * fraction)), replace=False)
    return np.isin(groups, chosen)


def _clamp_inputs(weights: list[np.ndarray], biases: list[np.ndarray], lo: np.ndarray,
                  hi: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Prepends a layer that clamps each input to [lo, hi], written as plain ReLU layers:
    relu(x - lo) - relu(x - hi) + lo = clamp(x, lo, hi) for lo <= hi, so the file format and
    the engine's MLP stay as they are. A ReLU net extrapolates linearly outside its data; with
    four or five training GPUs an unseen GPU's features often lie outside, so it gets the
    efficiency of the nearest edge of the data instead."""
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


def fit(family: str, x: np.ndarray, t_roof: np.ndarray, t_meas: np.ndarray,
        cfg: TrainConfig = TrainConfig(), floor_us: np.ndarray | None = None,
        groups: np.ndarray | None = None, val_groups: np.ndarray | None = None,
        stop_at: int | None = None, sample_weight: np.ndarray | None = None,
        pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
        sharpness: np.ndarray | None = None, floor_groups: np.ndarray | None = None,
        split_floor: bool = False) -> EfficiencyMLP:
    """See _fit. Torch's thread count and deterministic mode are set for the fit and restored
    after it: a process that trains (a test, a notebook) keeps its own settings."""
    import torch

    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:
        return _fit(family, x, t_roof, t_meas, cfg, floor_us, groups, val_groups, stop_at, sample_weight, pairs,
                    sharpness, floor_groups, split_floor)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def _fit(family: str, x: np.ndarray, t_roof: np.ndarray, t_meas: np.ndarray,
         cfg: TrainConfig, floor_us: np.ndarray | None, groups: np.ndarray | None,
         val_groups: np.ndarray | None, stop_at: int | None,
         sample_weight: np.ndarray | None = None,
         pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
         sharpness: np.ndarray | None = None, floor_groups: np.ndarray | None = None,
         split_floor: bool = False) -> EfficiencyMLP:
    """Fits the floor-free kernel time k = t_roof / (E_MAX * sigmoid(mlp(x))) so that the
    harness time (floor^p + k^p)^(1/p) matches t_meas, with an L1 loss on log time (a
    relative-error loss). Rows at the floor then only bound k from above.

    Validation: the rows with a non-empty `val_groups` label (e.g. a GPU's name) are held out,
    or else a fraction of the shapes (`groups`); the weights with the least validation loss
    (mean over labels) are kept and each label's loss curve is recorded (metadata
    "validation_curve"). With `stop_at`, every row trains and the weights after that step (of
    the same `cfg.steps` schedule) are kept. `sample_weight` (default uniform) is each row's
    relative chance of being drawn into a batch (a small data set among a large one).
    `pairs` (features and roofline times of a problem, then of the same problem with one
    dimension doubled, on the same GPU and precision) adds a penalty wherever the larger
    problem's kernel time comes out below the smaller's (MONOTONE_WEIGHT x the log-time
    shortfall, over a batch of pairs each step): time should not fall as a problem grows. Their
    features are clamped to the training range, as the exported model's input layer does.
    `sharpness` (default cfg.floor_sharpness for every row) is each row's harness exponent p: a
    source whose harness adds its floor to the kernel (one call between CUDA events) has p = 1.
    `floor_groups` (default: none) numbers rows whose floor is fitted with the net (-1: the
    floor stays `floor_us`): each group's log floor starts at its rows' `floor_us` and moves by
    one shared offset, trained with the same loss (no weight decay); the offsets of the kept
    step are returned in metadata["floor_log_offsets"], one per group. `split_floor`: each
    group's floor F is also split into a share s that adds to the kernel and the rest that
    overlaps it, time = s F + ((1 - s) F)^p + kernel^p)^(1/p) (harness_time), s fitted per
    group from 0.5 (metadata["floor_add_shares"])."""
    import torch

    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(cfg.seed)
    # x (and the pairs' features) hold every feature of the family: keep the model's own.
    names, cols = model_features(family, cfg)
    x = x[:, cols]
    if pairs is not None:
        pairs = (pairs[0][:, cols], pairs[1], pairs[2][:, cols], pairs[3])
    if floor_us is None:
        floor_us = np.zeros(len(x))
    if sharpness is None:
        sharpness = np.full(len(x), cfg.floor_sharpness)
    if floor_groups is None:
        floor_groups = np.full(len(x), -1)
    n_floor_groups = int(floor_groups.max()) + 1
    if len(x) > cfg.max_rows:
        keep = np.sort(rng.choice(len(x), cfg.max_rows, replace=False))
        x, t_roof, t_meas, floor_us = x[keep], t_roof[keep], t_meas[keep], floor_us[keep]
        sharpness, floor_groups = sharpness[keep], floor_groups[keep]
        sample_weight = None if sample_weight is None else sample_weight[keep]
        groups = None if groups is None else groups[keep]
        val_groups = None if val_groups is None else val_groups[keep]
    if stop_at is not None:
        val = np.zeros(len(x), dtype=bool)
    elif val_groups is not None:
        val = np.asarray(val_groups) != ""
    else:
        val = _split(len(x), groups, cfg.val_fraction, rng)
    labels = np.where(val, "validation", "") if val_groups is None else np.asarray(val_groups)
    last = cfg.steps if stop_at is None else min(stop_at, cfg.steps)
    mean = x[~val].mean(axis=0)
    std = x[~val].std(axis=0)
    std[std < 1e-6] = 1.0
    def tensor(a: np.ndarray) -> "torch.Tensor":
        return torch.tensor(a, dtype=torch.float32)
    unused = [i for i, n in enumerate(names) if n in cfg.ignore_features]
    xn = (x - mean) / std
    xn[:, unused] = 0.0  # the engine still computes them: their weights are zeroed below
    xs = tensor(xn)
    if pairs is not None:
        lo, hi = xn[~val].min(axis=0), xn[~val].max(axis=0)
        if not cfg.clamp_inputs:
            lo, hi = np.full_like(lo, -np.inf), np.full_like(hi, np.inf)

        def clamped(a: np.ndarray) -> "torch.Tensor":
            out = np.clip((a - mean) / std, lo, hi)
            out[:, unused] = 0.0
            return tensor(out)
        xa, log_roof_a = clamped(pairs[0]), tensor(np.log(pairs[1]))
        xb, log_roof_b = clamped(pairs[2]), tensor(np.log(pairs[3]))
    log_roof = tensor(np.log(t_roof))
    log_meas = tensor(np.log(t_meas))
    log_floor = tensor(np.log(np.maximum(floor_us, 1e-9)))
    p = tensor(sharpness)
    floor_group = torch.tensor(np.maximum(floor_groups, 0))
    floor_fitted = tensor((floor_groups >= 0).astype(np.float64))
    train_idx = torch.tensor(np.nonzero(~val)[0])
    draw_p = None if sample_weight is None else torch.tensor(sample_weight[~val], dtype=torch.float64)
    val_idx = torch.tensor(np.nonzero(val)[0])
    val_sets = {str(g): torch.tensor(np.nonzero(labels == g)[0]) for g in np.unique(labels[val])}
    # Start from the median efficiency of the rows well above their floor, so the first steps
    # fit the shape of the data rather than its scale.
    above = t_meas > 2.0 * floor_us
    log_eff0 = np.median(np.log(t_roof[above] / t_meas[above])) if above.any() else 0.0
    eff0 = float(np.clip(np.exp(log_eff0) / E_MAX, 1e-6, 0.99))
    log_emax = float(np.log(E_MAX))

    def train_member(seed: int) -> tuple:
        torch.manual_seed(seed)
        layers: list[torch.nn.Module] = []
        width = x.shape[1]
        for h in cfg.hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
            width = h
        layers.append(torch.nn.Linear(width, 1))
        net = torch.nn.Sequential(*layers)
        with torch.no_grad():
            net[-1].bias.fill_(float(np.log(eff0 / (1.0 - eff0))))
        floor_offset = torch.zeros(max(n_floor_groups, 1), requires_grad=True)
        share_logit = torch.zeros(max(n_floor_groups, 1), requires_grad=split_floor)

        def loss_of(idx: "torch.Tensor") -> "torch.Tensor":
            log_kernel = log_roof[idx] - log_emax - torch.nn.functional.logsigmoid(net(xs[idx])[:, 0])
            lf = log_floor[idx] + floor_fitted[idx] * floor_offset[floor_group[idx]]
            if not split_floor:
                log_harness = torch.logaddexp(p[idx] * lf, p[idx] * log_kernel) / p[idx]
            else:
                # unfitted rows: share 0 (log share -> -inf), the plain soft maximum
                theta = share_logit[floor_group[idx]]
                log_add = torch.where(floor_fitted[idx] > 0, torch.nn.functional.logsigmoid(theta),
                                      torch.full_like(theta, -1e4)) + lf
                log_rest = torch.where(floor_fitted[idx] > 0, torch.nn.functional.logsigmoid(-theta),
                                       torch.zeros_like(theta)) + lf
                merged = torch.logaddexp(p[idx] * log_rest, p[idx] * log_kernel) / p[idx]
                log_harness = torch.logaddexp(log_add, merged)
            return (log_harness - log_meas[idx]).abs().mean()

        def monotone_penalty(idx: "torch.Tensor") -> "torch.Tensor":
            log_small = log_roof_a[idx] - torch.nn.functional.logsigmoid(net(xa[idx])[:, 0])
            log_big = log_roof_b[idx] - torch.nn.functional.logsigmoid(net(xb[idx])[:, 0])
            return torch.relu(log_small - log_big).mean()

        def val_losses() -> dict[str, float]:
            with torch.no_grad():
                return {g: float(loss_of(i)) for g, i in val_sets.items()}

        params = [{"params": list(net.parameters())}]
        if n_floor_groups > 0:
            params.append({"params": [floor_offset] + ([share_logit] if split_floor else []), "weight_decay": 0.0})
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.05)
        gen = torch.Generator().manual_seed(seed)
        def snapshot() -> list["torch.Tensor"]:
            return [t.detach().clone() for t in net.state_dict().values()] + [floor_offset.detach().clone(),
                                                                              share_logit.detach().clone()]

        best = (float("inf"), 0, snapshot())
        curve: dict[str, list[float]] = {g: [] for g in val_sets}
        for step in range(1, last + 1):
            n_batch = min(cfg.batch, len(train_idx))
            if draw_p is None:
                idx = train_idx[torch.randint(0, len(train_idx), (n_batch,), generator=gen)]
            else:
                idx = train_idx[torch.multinomial(draw_p, n_batch, replacement=True, generator=gen)]
            loss = loss_of(idx)
            if pairs is not None:
                pidx = torch.randint(0, len(pairs[0]), (cfg.batch,), generator=gen)
                loss = loss + MONOTONE_WEIGHT * monotone_penalty(pidx)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            if len(val_idx) and (step % cfg.eval_every == 0 or step == last):
                per = val_losses()
                for g, v in per.items():
                    curve[g].append(v)
                v = float(np.mean(list(per.values())))
                if v < best[0]:
                    best = (v, step, snapshot())
        if len(val_idx):
            net.load_state_dict(dict(zip(net.state_dict().keys(), best[2][:-2])))
            with torch.no_grad():
                floor_offset.copy_(best[2][-2])
                share_logit.copy_(best[2][-1])
        linears = [m for m in net if isinstance(m, torch.nn.Linear)]
        with torch.no_grad():
            linears[0].weight[:, unused] = 0.0  # no effect on training (the inputs were 0 there)
        return ([m.weight.detach().numpy().astype(np.float64) for m in linears],
                [m.bias.detach().numpy().astype(np.float64) for m in linears], best[1] or last, best[0], curve,
                floor_offset.detach().numpy().astype(np.float64)[:n_floor_groups],
                1.0 / (1.0 + np.exp(-share_logit.detach().numpy().astype(np.float64)[:n_floor_groups])))

    members = [train_member(cfg.seed + 1000 * i) for i in range(cfg.members)]
    weights, biases = _pack_ensemble([m[0] for m in members], [m[1] for m in members])
    if cfg.clamp_inputs:
        weights, biases = _clamp_inputs(weights, biases, xn[~val].min(axis=0), xn[~val].max(axis=0))
    best = (float(np.mean([m[3] for m in members])), [m[2] for m in members])
    curve = {g: [float(v) for v in np.mean([m[4][g] for m in members], axis=0)] for g in val_sets}
    return EfficiencyMLP(
        family, mean.astype(np.float32), std.astype(np.float32),
        [w.astype(np.float32) for w in weights], [b.astype(np.float32) for b in biases],
        {"format": FORMAT, "version": FORMAT_VERSION, "family": family, "layers": len(weights),
         "input_clamp": ("layer 0 clamps each normalised feature to its training range "
                         "(relu(x - lo) - relu(x - hi) + lo), so the model does not extrapolate")
                        if cfg.clamp_inputs else "none: the ReLU net extrapolates linearly outside its data",
         "hidden": list(cfg.hidden), "members": cfg.members, "activation": "relu", "e_max": E_MAX,
         "launch_floor_us": LAUNCH_FLOOR_US,
         "features": list(names),
         "ignored_features": [names[i] for i in unused],
         "shape_columns": list(feats.SHAPE_COLUMNS[family]),
         "normalisation": "x' = (x - norm.mean) / norm.std (tensors in the .safetensors file)",
         "output": "time_us = max(launch_floor_us, roofline_us / (e_max * sigmoid(y)))",
         "early_stopping": {"best_step": best[1], "validation_loss": None if not len(val_idx) else best[0],
                            "validation_rows": int(len(val_idx)), "stop_at": stop_at},
         "validation_curve": {"every": cfg.eval_every, "loss": curve},
         **({"floor_log_offsets": [float(v) for v in np.mean([m[5] for m in members], axis=0)]}
            if n_floor_groups > 0 else {}),
         **({"floor_add_shares": [float(v) for v in np.mean([m[6] for m in members], axis=0)]}
            if n_floor_groups > 0 and split_floor else {})},
    )


def source_weights(source: np.ndarray, share: float, base: str = "neusight") -> np.ndarray:
    """Per-row sample weights giving the rows not from `base` `share` of the total weight and
    `base`'s rows the rest (each source's rows equal among themselves); all ones when either
    source is absent."""
    other = source != base
    n_other, n_base = int(other.sum()), int((~other).sum())
    if n_other == 0 or n_base == 0:
        return np.ones(len(source))
    return np.where(other, share / n_other, (1.0 - share) / n_base)


def ape(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(pred - meas) / meas * 100.0


def summary(errors: np.ndarray) -> dict[str, float]:
    if len(errors) == 0:
        return {"n": 0}
    return {"n": int(len(errors)), "mean": float(np.mean(errors)), "median": float(np.median(errors)),
            "p90": float(np.percentile(errors, 90))}


def split_by_shape(rows: KernelArrays, fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of validation rows: a fraction of the distinct shapes, on every GPU."""
    keys = rows.shape_keys()
    unique = np.unique(keys)
    rng = np.random.default_rng(seed)
    chosen = set(rng.choice(unique, max(1, int(len(unique) * fraction)), replace=False).tolist())
    return np.array([k in chosen for k in keys])


def gpu_dir_name(gpu: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", gpu)


def _log(text: str) -> None:
    print(text, flush=True)


def _harness_metadata(floors: dict[str, dict[str, float]], gpus: list[str], sharpness: float) -> dict:
    per_op = {op: {g: v for g, v in per_gpu.items() if g in gpus} for op, per_gpu in floors.items()}
    return {"per_gpu": per_op, "median": {op: float(np.median(list(v.values()))) for op, v in per_op.items() if v},
            "sharpness": sharpness,
            "note": "NeuSight's per-call harness floor (us) per op, measured on the training GPUs; "
                    "habitat.evaluate adds their median to compare with NeuSight's rows. "
                    "The engine ignores it (it uses launch_floor_us)."}


def _harness_prediction(model: EfficiencyMLP, x: np.ndarray, t_roof: np.ndarray, ops: np.ndarray) -> np.ndarray:
    return soft_max(model.harness_floor_us(ops), model.kernel_from_features(x, t_roof),
                    model.metadata["harness_floor_us"]["sharpness"])


def _fold_floors(rows: KernelArrays, floors: dict[str, dict[str, float]], train_gpus: Set[str]) -> np.ndarray:
    """Each row's harness floor: its own GPU's when that GPU trains, else the median of the
    training GPUs' floors for the op (all an unseen GPU can be given)."""
    median = {op: float(np.median([v for g, v in per.items() if g in train_gpus])) for op, per in floors.items()}
    return np.array([floors[k][g] if g in train_gpus else median[k] for k, g in zip(floor_keys(rows), rows.device)])


class GpuFolds:
    """Chooses how many steps to train from GPUs held out of training, never from the GPU a
    model is evaluated on: for a model trained on GPUs S, each v in S is held out in turn
    (a net trained on S - {v}, validated on v) and the step with the least mean loss wins.
    Nets trained on the same GPUs are shared between folds (validated on every left-out GPU).

    `floors(train)`: each row's harness floor (fit's floor_us) for a net trained on the GPUs
    `train`. `train_weights(mask)`: the sample weights of the training rows `mask` (default:
    uniform draws). `group_of(gpu)`: the held-out GPUs' losses are averaged within each group
    first, then the groups alike (default: every GPU alike). `rule`: the description recorded
    in the step selection."""

    def __init__(self, rows: KernelArrays, x: np.ndarray, t_roof: np.ndarray, cfg: TrainConfig,
                 floors: Callable[[frozenset[str]], np.ndarray],
                 train_weights: Callable[[np.ndarray], np.ndarray] | None = None,
                 group_of: Callable[[str], Hashable] | None = None,
                 rule: str = "least mean loss on GPUs held out in turn from the training GPUs"):
        self.rows, self.x, self.t_roof, self.cfg = rows, x, t_roof, cfg
        self.floors, self.train_weights, self.group_of, self.rule = floors, train_weights, group_of, rule
        self.keys = rows.shape_keys()
        self._curves: dict[frozenset[str], dict[str, list[float]]] = {}

    def _curve(self, train: frozenset[str]) -> dict[str, list[float]]:
        if train not in self._curves:
            rows = self.rows
            training = np.isin(rows.device, sorted(train))
            labels = np.where(training, "", rows.device)
            w = None
            if self.train_weights is not None:
                w = np.zeros(len(rows))
                w[training] = self.train_weights(training)
            m = fit(rows.family, self.x, self.t_roof, rows.latency_us, self.cfg, self.floors(train), self.keys,
                    val_groups=labels, sample_weight=w)
            self._curves[train] = m.metadata["validation_curve"]["loss"]
        return self._curves[train]

    def best_step(self, on: list[str]) -> tuple[int, dict]:
        """The step count for a model trained on the GPUs `on` and its step_selection metadata
        (empty, and cfg.steps, with fewer than three GPUs)."""
        if len(on) < 3:
            return self.cfg.steps, {}
        # A GPU all of whose rows fit's max_rows subsample left out has no curve (--quick runs).
        curves = {v: c[v] for v in on if v in (c := self._curve(frozenset(on) - {v}))}
        if not curves:
            return self.cfg.steps, {}
        if self.group_of is None:
            mean = np.mean(list(curves.values()), axis=0)
        else:
            group_of = self.group_of
            groups = dict.fromkeys(group_of(v) for v in curves)
            mean = np.mean([np.mean([c for v, c in curves.items() if group_of(v) == k], axis=0) for k in groups],
                           axis=0)
        step = min((int(np.argmin(mean)) + 1) * self.cfg.eval_every, self.cfg.steps)
        return step, {"rule": self.rule, "held_out": on, "every": self.cfg.eval_every,
                      "mean_loss": [round(float(v), 5) for v in mean], "best_step": step}
