"""NeuSight's end-to-end training labels per phase: the label's forward and backward (with
gradient accumulation) against the sum of NeuSight's own per-node measurements of the same run
and against Habitat's shape-based forecast of those nodes (habitat.evaluate.models, the
installed weights).

    python benchmarks/accuracy/neusight_phases.py [--data DIR] [--weights DIR]

It separates what a per-kernel model can reach from what the labels hold beyond their nodes:
where a label's phase exceeds its node sum, no forecast of the nodes' kernels gets closer than
that gap. Prints one row per training label and the mean |error| of each comparison.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from habitat.evaluate import models as M  # noqa: E402
from habitat.evaluate import predictors as P  # noqa: E402
from habitat.learned.devices import default_table  # noqa: E402

PHASES = {"fw": ("fw_latency", ("fw",)), "bw": ("bwall_latency", ("bw", "acc"))}


def rows(data: Path, weights: Path) -> list[dict]:
    devices = default_table()
    models = P.ModelSet(weights)
    out = []
    for gpu_dir in sorted((data / "labels").iterdir()):
        if not gpu_dir.is_dir() or devices.try_find(gpu_dir.name) is None:
            continue
        predict = M._model_predictor(models, devices.find(gpu_dir.name), gpu_dir.name)
        for path in sorted(gpu_dir.glob("*-train-*.csv")):
            label = json.loads(path.with_suffix(".json").read_text())
            nodes = M.load_config(path, training=True)
            row = {"config": path.stem, "gpu": gpu_dir.name}
            for phase, (key, parts) in PHASES.items():
                row[f"{phase}_label"] = float(label[key])
                row[f"{phase}_nodes"] = sum(n.repeat * n.measured[p] for n in nodes for p in parts) / 1000
                row[f"{phase}_forecast"] = sum(n.repeat * M._parts_time(n.parts.get(p, []), predict)
                                               for n in nodes for p in parts) / 1000
            out.append(row)
    return out


def pct(a: float, b: float) -> float:
    return (a - b) / b * 100


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/neusight")
    ap.add_argument("--weights", type=Path, default=ROOT / "weights")
    args = ap.parse_args(argv)
    table = rows(args.data, args.weights)
    print("| config | GPU | fw label ms | fw nodes (vs label) | fw forecast (vs nodes) | bw label ms "
          "| bw nodes (vs label) | bw forecast (vs nodes) | e2e forecast vs label |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in table:
        e2e = pct(r["fw_forecast"] + r["bw_forecast"], r["fw_label"] + r["bw_label"])
        print(f"| {r['config']} | {r['gpu']} | {r['fw_label']:.1f} | {r['fw_nodes']:.1f} "
              f"({pct(r['fw_nodes'], r['fw_label']):+.1f}%) | {r['fw_forecast']:.1f} "
              f"({pct(r['fw_forecast'], r['fw_nodes']):+.1f}%) | {r['bw_label']:.1f} | {r['bw_nodes']:.1f} "
              f"({pct(r['bw_nodes'], r['bw_label']):+.1f}%) | {r['bw_forecast']:.1f} "
              f"({pct(r['bw_forecast'], r['bw_nodes']):+.1f}%) | {e2e:+.1f}% |")
    print()
    for phase in PHASES:
        nodes = np.array([abs(pct(r[f"{phase}_nodes"], r[f"{phase}_label"])) for r in table])
        fc_nodes = np.array([abs(pct(r[f"{phase}_forecast"], r[f"{phase}_nodes"])) for r in table])
        fc_label = np.array([abs(pct(r[f"{phase}_forecast"], r[f"{phase}_label"])) for r in table])
        print(f"{phase}: node sum vs label {nodes.mean():.1f}% mean |error|; forecast vs node sum "
              f"{fc_nodes.mean():.1f}%; forecast vs label {fc_label.mean():.1f}% ({len(table)} labels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
