#!/usr/bin/env bash
# The project's written rules, checked: clang-format on every C++ file, ruff (ruff.toml), mypy on
# the torch-free layers (mypy.ini, with the extension modules' stubs python/habitat/_engine.pyi
# and _C.pyi), and the complexity ratchet (.ci/complexity.py). The tests that keep the rest
# (tests/python/test_layout.py, test_repo_paths.py, test_stubs.py) run with the suite. A missing
# tool is installed (clang-format from Debian, the others from PyPI at the versions last checked
# with). Each check prints its time; the exit status is 1 if any failed.
#
#   bash .ci/rules.sh      (from anywhere; about a minute)
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v clang-format >/dev/null; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-format >/dev/null
fi
need=()
for tool in ruff==0.17.6 mypy==2.4.1 lizard==1.24.3; do
  "$PYTHON" -c "import ${tool%%=*}" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
  "$PYTHON" -m pip install -q "${need[@]}"
fi

status=0
check() {  # check NAME COMMAND...: runs it, prints its time, remembers a failure
  local name=$1 t0=$SECONDS
  shift
  echo "== $name =="
  if "$@"; then
    echo "== $name: ok, $((SECONDS - t0)) s =="
  else
    echo "== $name: FAILED, $((SECONDS - t0)) s =="
    status=1
  fi
}

# Left out, each with why: learned_model.cpp is being rewritten on the lead's issue-30 branch
# (a reformat here would only collide with it); remove the entry when that lands.
CLANG_FORMAT_SKIP=(':!csrc/src/learned/learned_model.cpp')
clang_format() {
  git ls-files -z '*.cpp' '*.cc' '*.cu' '*.h' '*.hpp' "${CLANG_FORMAT_SKIP[@]}" \
    | xargs -0 clang-format --dry-run -Werror
}
check "clang-format ($(clang-format --version | grep -o 'version [0-9.]*'))" clang_format
check "ruff check ." "$PYTHON" -m ruff check .
check "mypy (mypy.ini)" "$PYTHON" -m mypy --cache-dir "${HABITAT_MYPY_CACHE:-build/mypy}"
check "complexity ratchet (.ci/complexity.py)" "$PYTHON" .ci/complexity.py
exit $status
