"""Prints the requirements pyproject.toml declares for the groups named, one a line.

    python cmake/requirements.py [--missing] GROUP...

A group is `build` (build-system.requires), `run` (project.dependencies) or an extra
(project.optional-dependencies; an extra naming habitat[...] brings those extras in). With
--missing, only the requirements this Python does not satisfy (absent, the wrong version, or a
marker that applies): what `bash run.sh` and `.ci/no_torch.sh` hand to pip, so that pip runs only
when something is missing and the list of packages lives in pyproject.toml alone.

Runs before habitat and its build requirements are installed, on Python 3.9+: tomllib or
tomli, and packaging, else the copies pip vendors.
"""
from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python < 3.11
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ImportError:
        from pip._vendor import tomli as tomllib  # type: ignore[no-redef]
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def declared(project: dict[str, Any], group: str, seen: set[str] | None = None) -> list[Requirement]:
    """The requirements of one group, extras that name this project expanded."""
    seen = set() if seen is None else seen
    if group in seen:
        return []
    seen.add(group)
    if group == "build":
        lines = project["build-system"]["requires"]
    elif group == "run":
        lines = project["project"].get("dependencies", [])
    else:
        extras = project["project"].get("optional-dependencies", {})
        if group not in extras:
            known = ", ".join(["build", "run", *extras])
            raise SystemExit(f"requirements.py: no group {group!r} in {PYPROJECT} (known: {known})")
        lines = extras[group]
    own = canonicalize_name(project["project"]["name"])
    found: list[Requirement] = []
    for line in lines:
        req = Requirement(line)
        if canonicalize_name(req.name) == own:
            for extra in sorted(req.extras):
                found.extend(declared(project, extra, seen))
        else:
            found.append(req)
    return found


def satisfied(req: Requirement) -> bool:
    if req.marker is not None and not req.marker.evaluate():
        return True
    try:
        version = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        return False
    return req.specifier.contains(version, prereleases=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", action="store_true", help="only what this Python lacks")
    parser.add_argument("groups", nargs="+", metavar="GROUP")
    args = parser.parse_args(argv)
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    printed: set[str] = set()
    for group in args.groups:
        for req in declared(project, group):
            if str(req) in printed or (args.missing and satisfied(req)):
                continue
            printed.add(str(req))
            print(req)
    return 0


if __name__ == "__main__":
    sys.exit(main())
