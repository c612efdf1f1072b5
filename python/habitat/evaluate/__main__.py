"""python -m habitat.evaluate {kernels,models} --data DIR [--quick] [--json OUT] [--origin G] [--target G]
python -m habitat.evaluate distributed [--data DIR] [--target GPU_DIR] [--json OUT]
python -m habitat.evaluate precision [--data benchmarks/results/kernels/H100-SXM5-80GB-2026-11-26] [--all-rows]
    [--json OUT]
python -m habitat.evaluate cards --data DIR [--origin GPU --target GPU] [--json OUT]"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from habitat.data.files import atomic_write_text
from habitat.evaluate import cards, distributed, kernels, models, precision
from habitat.evaluate import predictors as P
from habitat.learned.devices import DeviceTable, default_table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m habitat.evaluate",
                                description="Accuracy of Habitat's predictors on NeuSight-format measurements.")
    p.add_argument("what", choices=("kernels", "models", "distributed", "precision", "cards"),
                   help="kernels: per-op CSVs (kernels/, test/); models: end-to-end labels/; "
                        "distributed: 4-GPU DP/TP/PP labels of the --target GPU folder in --data (default: the "
                        "repository's copy, NVIDIA_A100-SXM4-40GB); "
                        "precision: per op against a device-time kernel collection (the held-out shapes, or "
                        "--all-rows); "
                        "cards: two GPUs on the same test/ GEMM shapes, measured and forecast ratio")
    p.add_argument("--data", default=None, help="NeuSight-format data directory (precision: collect_kernels.py "
                                                "output of one GPU; default the committed H100 set)")
    p.add_argument("--weights", default=None, help="weights directory (default: the packaged weights/)")
    p.add_argument("--devices", default=None, help="devices.json (default: the package's)")
    p.add_argument("--quick", action="store_true", help="a small subsample (tests, CI)")
    p.add_argument("--all-rows", action="store_true",
                   help="precision only: score every row of --data (a collection the models never saw)")
    p.add_argument("--json", default=None, help="write the numbers to this file")
    p.add_argument("--origin", action="append", default=None, help="restrict origins (repeatable)")
    p.add_argument("--target", action="append", default=None,
                   help="restrict targets (repeatable); distributed: the GPU folder whose labels to forecast")
    p.add_argument("--groups", default=None,
                   help="kernels only: comma list of bmm,linear,conv,elementwise,softmax,ln (default all)")
    args = p.parse_args(argv)
    devices = DeviceTable.load(args.devices) if args.devices else default_table()
    weights = Path(args.weights) if args.weights else P.default_weights_dir()
    start = time.time()
    if args.what == "precision":
        results = precision.evaluate(Path(args.data) if args.data else precision.default_data(), weights, devices,
                                     args.all_rows)
        precision.print_report(results)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(args.json, json.dumps(results, indent=1, sort_keys=True) + "\n")
        return 0
    model_set = P.ModelSet(weights)
    if args.data is None and args.what != "distributed":
        p.error(f"{args.what} needs --data (a copy of NeuSight's data directory)")
    data = Path(args.data) if args.data else distributed.default_data()
    origins = set(args.origin) if args.origin else None
    targets = set(args.target) if args.target else None
    if args.what == "cards":
        results = cards.evaluate(data, model_set, devices, *(args.origin or [cards.DEFAULT_ORIGIN])[:1],
                                 *(args.target or [cards.DEFAULT_TARGET])[:1])
        cards.print_report(results)
    elif args.what == "kernels":
        groups = set(args.groups.split(",")) if args.groups else None
        unknown = (groups or set()) - set(kernels.GROUPS)
        if unknown:
            p.error(f"unknown groups {sorted(unknown)}; known: {', '.join(kernels.GROUPS)}")
        results = kernels.evaluate(data, model_set, devices, args.quick, origins, targets, groups)
        kernels.print_report(results)
    elif args.what == "distributed":
        try:
            results = distributed.evaluate(data, model_set, devices, (args.target or [None])[0])
        except (FileNotFoundError, ValueError) as exc:
            p.error(str(exc))
        distributed.print_report(results)
    else:
        results = models.evaluate(data, model_set, devices, args.quick, origins, targets)
        results["summary"] = models.print_report(results)
    results["anchors"] = {"kernel": P.ANCHORS_KERNEL, "e2e": P.ANCHORS_E2E}
    # the checkout's weights by their path in it (a committed result names no machine's folder)
    results["weights"] = str(weights.relative_to(Path.cwd()) if weights.is_relative_to(Path.cwd()) else weights)
    results["quick"] = args.quick
    print(f"\n({args.what}: {time.time() - start:.0f}s)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json, json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
