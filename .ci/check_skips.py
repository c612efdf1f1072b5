"""Fails when the last pytest session skipped a test that tests/python/skips_allowed.txt does not
allow, naming each one: a skip is a test that did not run, so each must have a reason to be
expected where CI runs (no GPU, root, no torch) rather than hide a missing package or file.

    python .ci/check_skips.py        (after the suite: `bash run.sh test`)

The skips come from pytest's cache (.pytest_cache/v/habitat/skips), where tests/python/conftest.py
records each session's. An allow-list line is `<regex>  # <why>`: the regex is searched for in
the skip's reason; blank lines and lines starting with # are comments.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = ROOT / "tests" / "python" / "skips_allowed.txt"
RECORD = ROOT / ".pytest_cache" / "v" / "habitat" / "skips"


def allowed_patterns(path: Path) -> list[re.Pattern[str]]:
    patterns = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        pattern, sep, why = line.partition("  # ")
        if not sep or not why.strip():
            raise SystemExit(f"{path}:{number}: an entry is '<regex>  # <why>'; this one has no why: {line!r}")
        try:
            patterns.append(re.compile(pattern.strip()))
        except re.error as e:
            raise SystemExit(f"{path}:{number}: {pattern.strip()!r} is not a regular expression ({e})") from None
    return patterns


def main() -> int:
    if not RECORD.is_file():
        print(f"check_skips: no record of a pytest session ({RECORD.relative_to(ROOT)}): run the suite "
              "first (bash run.sh test), with pytest's cache on")
        return 1
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    patterns = allowed_patterns(ALLOWED)
    unlisted = [(test, reason) for test, reason in record["skips"]
                if not any(p.search(reason) for p in patterns)]
    args = " ".join(record["args"]) or "(the whole suite)"
    print(f"check_skips: pytest {args}: {record['tests']} tests, {len(record['skips'])} skipped, "
          f"{len(unlisted)} not allowed by {ALLOWED.relative_to(ROOT)}")
    for test, reason in unlisted:
        print(f"  {test}: skipped: {reason}")
    if unlisted:
        print("Make these run here (install what they need in run.sh or the test extra, add the "
              "missing file), or, if they cannot run where CI does, allow the reason with why.")
    return 1 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
