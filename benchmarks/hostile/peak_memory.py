"""Peak memory of reading an input file, against its decompressed size (issue 34's target:
at most 2x, and never past the cap), and of reading + forecasting the shipped CPU traces.

    python benchmarks/hostile/peak_memory.py [--sizes-mb 64 256] [--traces]

Each measurement runs in a fresh subprocess; the peak is its resident set (ru_maxrss) less
the resident set after importing habitat, so it is what the read itself added.
Results: benchmarks/results/hostile-input.md.
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import resource, sys
import habitat
from habitat.data.input_files import read_input_bytes
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if sys.argv[2] == "read":
    data = read_input_bytes(sys.argv[1])
    size = len(data)
else:
    from habitat.data.forecast import Forecast
    f = Forecast.load(sys.argv[1], targets=["A100"])
    size = 0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(size, (peak - base) * 1024)
"""


def measure(path: Path, mode: str) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(path), mode], capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[0]), int(out[1])


def synthetic(folder: Path, mb: int) -> Path:
    """A JSON text of `mb` MB (a trace's op records repeated)."""
    op = json.dumps({"id": 0, "name": "aten::mm", "args": [{"name": "self", "tensor": {"shape": [64, 128]}}]})
    path = folder / f"text_{mb}mb.json"
    with open(path, "w") as f:
        f.write("[")
        written = 1
        while written < mb << 20:
            f.write(op + ",")
            written += len(op) + 1
        f.write("0]")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=int, nargs="*", default=[64, 256])
    parser.add_argument("--traces", action="store_true", help="also read and forecast the shipped CPU traces")
    args = parser.parse_args()
    print("| input | decompressed MB | read peak MB | peak / size |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for mb in args.sizes_mb:
            plain = synthetic(Path(folder), mb)
            packed = plain.with_suffix(".json.gz")
            with open(plain, "rb") as src, gzip.open(packed, "wb", compresslevel=1) as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            for path, kind in ((plain, "plain"), (packed, "gzip")):
                size, peak = measure(path, "read")
                print(f"| {mb} MB JSON, {kind} | {size / 1e6:.0f} | {peak / 1e6:.0f} | {peak / size:.2f} |",
                      flush=True)
    if args.traces:
        print("\n| trace | text MB | read + forecast peak MB | peak / text |\n|---|---|---|---|")
        for path in sorted((ROOT / "benchmarks/results/cpu-traces").glob("*.json.gz")):
            with gzip.open(path, "rb") as f:
                text = len(f.read())
            _, peak = measure(path, "forecast")
            print(f"| {path.name} | {text / 1e6:.1f} | {peak / 1e6:.0f} | {peak / text:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
