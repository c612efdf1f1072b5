"""Where a traced step's extra host time sits: the same workload's op self times compared
between two recorded traces, split into ops that launch kernels and ops that launch none.

    PYTHONPATH=python python3 benchmarks/timeline/host_slowdown.py [--out FILE]

For each workload traced in both runs of a pair (the H200 machine's format-1 run against the
H100 machine's, and the H100 machine's format-2 run of 2026-11-23 against its format-1 run of
2026-11-22), prints the ratio of the summed self time (an op's wall time outside its
children) of ops with kernels and of ops without, and the ratio of the plain steps the
benchmark measured (benchmark.measured.median_ms, CUDA events, no Habitat). If the extra
host time were CUPTI's cost inside launch calls, only ops with kernels would slow down; if
it were stalls between ops, neither self time would. A second table gives each trace's idle
gaps (no op open on any thread) over 1 ms. Reads the committed traces only.
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
PAIRS = [("h100-sxm5-80gb", "h200-sxm-141gb"), ("h100-sxm5-80gb", "h100-sxm5-80gb-2026-11-23")]


def _load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def self_times(doc: dict[str, Any]) -> tuple[float, float]:
    """(self time of ops that launch kernels, of ops that launch none), in ms, last step."""
    ops = doc["steps"][-1]["ops"]
    inside: dict[Any, float] = collections.defaultdict(float)
    for op in ops:
        if op.get("parent") is not None:
            inside[op["parent"]] += op["wall_us"]
    with_k = without = 0.0
    for op in ops:
        own = op["wall_us"] - inside[op["id"]]
        if op.get("kernels"):
            with_k += own
        else:
            without += own
    return with_k / 1e3, without / 1e3


def table() -> str:
    lines = ["| A | B | workload | self time, ops with kernels A -> B ms (ratio) "
             "| self time, ops without A -> B ms (ratio) | measured plain step A -> B ms (ratio) |",
             "|---|---|---|---|---|---|"]
    for a, b in PAIRS:
        for path_a in sorted((RESULTS / a / "traces").glob("*.json.gz")):
            path_b = RESULTS / b / "traces" / path_a.name
            if not path_b.exists():
                continue
            doc_a, doc_b = _load(path_a), _load(path_b)
            (ka, na), (kb, nb) = self_times(doc_a), self_times(doc_b)
            ma, mb = doc_a["benchmark"]["measured"]["median_ms"], doc_b["benchmark"]["measured"]["median_ms"]
            lines.append(f"| {a} | {b} | {path_a.name.removesuffix('.json.gz')} | {ka:.1f} -> {kb:.1f} ({kb / ka:.2f}) "
                         f"| {na:.1f} -> {nb:.1f} ({nb / na:.2f}) | {ma:.1f} -> {mb:.1f} ({mb / ma:.2f}) |")
    return "\n".join(lines)


def idle_gaps(doc: dict[str, Any], over_us: float = 1000.0) -> tuple[int, float, float]:
    """(gaps over `over_us`, their sum in ms, the traced span in ms) of the last step: the
    gaps between the union of its op windows, when no op is open on any thread."""
    windows = sorted((op["start_us"], op["start_us"] + op["wall_us"]) for op in doc["steps"][-1]["ops"])
    if not windows:
        return 0, 0.0, 0.0
    n, total, end = 0, 0.0, windows[0][1]
    for start, stop in windows[1:]:
        if start - end > over_us:
            n, total = n + 1, total + start - end
        end = max(end, stop)
    return n, total / 1e3, (end - windows[0][0]) / 1e3


def gap_table() -> str:
    lines = ["| run | workload | traced span ms | idle gaps over 1 ms (sum ms) | measured plain step ms |",
             "|---|---|---|---|---|"]
    for folder in ("h100-sxm5-80gb", "h200-sxm-141gb", "h100-sxm5-80gb-2026-11-23"):
        for path in sorted((RESULTS / folder / "traces").glob("*.json.gz")):
            doc = _load(path)
            n, total, span = idle_gaps(doc)
            lines.append(f"| {folder} | {path.name.removesuffix('.json.gz')} | {span:.1f} | {n} ({total:.1f}) "
                         f"| {doc['benchmark']['measured']['median_ms']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    text = table() + "\n\n" + gap_table()
    print(text)
    if args.out:
        args.out.write_text("# command: PYTHONPATH=python python3 benchmarks/timeline/host_slowdown.py "
                            f"--out {args.out}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
