#!/usr/bin/env bash
# Habitat without torch: in a fresh venv with no torch, build and install the engine-only
# package (habitat._engine; the build skips habitat._C without torch), then analyse the golden
# trace from outside the repository: `habitat compare`, `habitat report`, Forecast.load, and
# tests/python/no_torch/test_no_torch.py. Prints PASS or FAIL and the time taken.
#
#   bash .ci/no_torch.sh            (needs python3 with venv, g++, cmake, nlohmann-json3-dev,
#                                    and PyPI for what pyproject.toml declares: the build
#                                    requirements, the dependencies, the plot and test extras)
#
# Nothing is cached: the venv and the work directory are temporary and removed at exit
# (HABITAT_KEEP_TMP=1 keeps them). The engine build dominates the time.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
START=$(date +%s)
TMP="$(mktemp -d -t habitat-no-torch.XXXXXX)"
cleanup() { [ "${HABITAT_KEEP_TMP:-0}" = 1 ] && echo "kept $TMP" || rm -rf "$TMP"; }
trap cleanup EXIT

fail() {
  echo "no_torch: FAIL ($1) after $(( $(date +%s) - START )) s"
  exit 1
}
step() { echo "== no_torch: $*"; }

step "venv in $TMP/venv"
"$PYTHON" -m venv "$TMP/venv" || fail "python3 -m venv"
# shellcheck disable=SC1091
source "$TMP/venv/bin/activate"
python -m pip install -q --upgrade pip || fail "pip upgrade"
# The build requirements (pyproject.toml's build-system.requires, read by cmake/requirements.py):
# --no-build-isolation below builds in this venv. The dependencies and extras come with habitat.
BUILD_REQUIRES=$(python "$REPO/cmake/requirements.py" build) || fail "cmake/requirements.py"
mapfile -t BUILD_REQUIRES <<<"$BUILD_REQUIRES"
python -m pip install -q "${BUILD_REQUIRES[@]}" || fail "pip install ${BUILD_REQUIRES[*]}"
python -c "import torch" 2>/dev/null && fail "torch is importable in the venv"

step "build and install habitat[plot,test] (engine only)"
# From a copy of the working tree (tracked and untracked, not ignored files): the repository's
# build/ holds objects compiled against torch's pybind11, which must not be reused here.
mkdir -p "$TMP/src"
(cd "$REPO" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - 2>/dev/null) \
  | tar -xf - -C "$TMP/src" || fail "copying the source tree"
BUILD_START=$(date +%s)
(cd "$TMP/src" && python -m pip install -q --no-build-isolation ".[plot,test]") \
  || fail "pip install --no-build-isolation .[plot,test]"
echo "   built and installed with its dependencies in $(( $(date +%s) - BUILD_START )) s"

GOLDEN="$REPO/tests/python/fixtures/golden_trace.json"
mkdir -p "$TMP/work" && cd "$TMP/work" || fail "cd"

step "habitat compare"
habitat compare "$GOLDEN" --epochs 10 --steps-per-epoch 2000 || fail "habitat compare"
step "habitat compare --plot"
habitat compare "$GOLDEN" --target A100 --target H100 --plot gpus.png >/dev/null || fail "habitat compare --plot"
[ -s gpus.png ] || fail "no gpus.png"
step "habitat predict"
habitat predict "$GOLDEN" --target H100 --target L4 >/dev/null || fail "habitat predict"
step "habitat report"
habitat report "$GOLDEN" -o report.html || fail "habitat report"
[ -s report.html ] || fail "no report.html"
step "Forecast.load"
python -c "
import sys, habitat
assert 'torch' not in sys.modules
f = habitat.Forecast.load('$GOLDEN')
print(f.targets, [round(f.time_ms(t), 6) for t in f.targets])
" || fail "Forecast.load"

step "tests/python/no_torch"
python -m pytest -q -p no:cacheprovider "$REPO/tests/python/no_torch/test_no_torch.py" \
  || fail "tests/python/no_torch"

echo "no_torch: PASS in $(( $(date +%s) - START )) s"
