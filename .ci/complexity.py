"""A ratchet on function complexity: no function of the project's code (C++ and Python, tests
left out) may pass a cyclomatic complexity (CCN, as lizard counts it) of LIMIT, but for the ones
in complexity-baseline.txt, which may not grow past their recorded CCN. An entry whose function
now measures less, or is gone, fails too, so that the baseline is lowered with it and the
function cannot grow back: the ratchet only turns one way.

    python .ci/complexity.py           check (CI)
    python .ci/complexity.py --update  rewrite the baseline from the tree (after splitting a function)

Tests are left out: a test's body is a flat run of cases and asserts.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lizard

LIMIT = 30  # issue 33: "no function over CCN 30"
ROOT = Path(__file__).resolve().parents[1]
BASELINE = Path(__file__).with_name("complexity-baseline.txt")
SUFFIXES = (".cpp", ".cc", ".cu", ".h", ".hpp", ".py")


def sources() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return sorted(f for f in out.stdout.decode().split("\0")
                  if f.endswith(SUFFIXES) and not f.startswith(("tests/", "third_party/")))


def measure() -> dict[str, int]:
    """{"path::function": CCN} for every function over LIMIT (overloads: the most complex)."""
    over: dict[str, int] = {}
    for path in sources():
        for fn in lizard.analyze_file(str(ROOT / path)).function_list:
            if fn.cyclomatic_complexity > LIMIT:
                key = f"{path}::{fn.name}"
                over[key] = max(over.get(key, 0), fn.cyclomatic_complexity)
    return over


def read_baseline() -> dict[str, int]:
    entries = {}
    for line in BASELINE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            ccn, key = line.split(maxsplit=1)
            entries[key] = int(ccn)
    return entries


def write_baseline(over: dict[str, int]) -> None:
    header = [f"# Functions over CCN {LIMIT} when the ratchet was last turned (.ci/complexity.py):",
              "# CCN, then path::function. Lower an entry, or remove it, when its function is split."]
    BASELINE.write_text("\n".join(header + [f"{ccn} {key}" for key, ccn in sorted(over.items())]) + "\n")


def main(argv: list[str]) -> int:
    over = measure()
    if argv[1:] == ["--update"]:
        write_baseline(over)
        print(f"wrote {BASELINE.relative_to(ROOT)}: {len(over)} functions over CCN {LIMIT}")
        return 0
    baseline = read_baseline()
    errors = []
    for key, ccn in sorted(over.items()):
        if key not in baseline:
            errors.append(f"{key}: CCN {ccn} > {LIMIT}; split it into named phases")
        elif ccn > baseline[key]:
            errors.append(f"{key}: CCN {ccn}, up from {baseline[key]}; split it, do not grow it")
    for key, ccn in sorted(baseline.items()):
        if over.get(key, 0) < ccn:
            now = f"CCN {over[key]}" if key in over else f"gone or at most CCN {LIMIT}"
            errors.append(f"{key}: {now}, recorded {ccn}; lower the baseline "
                          f"(python .ci/complexity.py --update)")
    worst = max(over.items(), key=lambda kv: kv[1], default=("none", 0))
    print(f"{len(over)} functions over CCN {LIMIT}, all in the baseline; the worst: {worst[0]} ({worst[1]})"
          if not errors else "\n".join(errors))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
