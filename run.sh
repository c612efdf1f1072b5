#!/usr/bin/env bash
# Sets Habitat up on a fresh Linux machine, then runs one job:
#   bash run.sh demo [--save step.json ...]   forecast a training step of a bundled model for
#                                             several GPUs (run where you are: files land there)
#   bash run.sh test [pytest arguments]       the Python (pytest) and C++ (GoogleTest, CTest)
#                                             suites; given test paths, only those (pytest)
# Set-up skips what is done: the system packages; torch (one already installed is kept, a CUDA
# build included; without a GPU the CPU build is installed); the Python packages pyproject.toml
# declares; and the build, while the sources are those of the last install (a stamp in the build
# folder). docs/building.md has the details and the measured times.
set -euo pipefail
CALLER_DIR=$PWD
cd "$(dirname "$0")"

job=${1:-demo}
shift || true
PYTHON=${PYTHON:-python3}
TORCH_VERSION=${HABITAT_TORCH_VERSION:-2.13.0}
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
# One build folder for the extension modules (pip install) and the C++ tests: the engine is
# compiled once for both.
BUILD_DIR=${HABITAT_BUILD_DIR:-build/cmake}
STAMP="$BUILD_DIR/habitat-install.stamp"

say() { echo "[habitat] $*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
pip_install() { "$PYTHON" -m pip install -q "$@" 2>&1 | { grep -v "Running pip as the 'root'" || true; }; }

install_system_packages() {
  local missing=()
  for pkg in cmake g++ ninja-build libgtest-dev nlohmann-json3-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing system packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# Whether pip finds a CPU build of torch==$TORCH_VERSION without an index (a local wheelhouse in
# its find-links): it then takes that file, and no network.
local_cpu_torch() {
  "$PYTHON" -m pip install --dry-run --no-index --no-deps --quiet --report - "torch==$TORCH_VERSION" 2>/dev/null \
    | "$PYTHON" -c 'import json, sys, urllib.parse as u
sys.exit("+cpu" not in u.unquote(json.load(sys.stdin)["install"][0]["download_info"]["url"]))' \
      2>/dev/null
}

install_torch() {
  # A torch already installed is kept (a CUDA build on a GPU machine): habitat builds against it.
  "$PYTHON" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' && return 0
  if nvidia-smi -L >/dev/null 2>&1; then
    say "installing torch==$TORCH_VERSION, PyPI's CUDA build (a GPU is present): a few GB with its CUDA libraries"
    pip_install "torch==$TORCH_VERSION"
  elif local_cpu_torch; then
    say "installing torch==$TORCH_VERSION+cpu (no GPU) from pip's local wheels"
    pip_install "torch==$TORCH_VERSION+cpu"
  else
    # PyPI's Linux wheel is the CUDA build, with several GB of CUDA libraries a CPU never uses.
    say "installing torch==$TORCH_VERSION, the CPU build (no GPU: nvidia-smi finds none), from $TORCH_CPU_INDEX"
    pip_install "torch==$TORCH_VERSION" --index-url "$TORCH_CPU_INDEX"
  fi
}

# The Python packages pyproject.toml declares for this job (cmake/requirements.py): the build
# requirements, the dependencies, the tensorboard and plot extras, and for the tests the test
# extra. pip runs only when one is missing.
install_python_packages() {
  local groups=(build run tensorboard plot) missing need
  [ "$job" = test ] && groups+=(test)
  install_torch
  missing=$("$PYTHON" cmake/requirements.py --missing "${groups[@]}")
  if [ -n "$missing" ]; then
    mapfile -t need <<<"$missing"
    say "installing Python packages: ${need[*]}"
    pip_install "${need[@]}"
  fi
}

# The files the build reads: with git, the two build files at the top and every file not ignored
# in a folder other than tests/, benchmarks/, docs/ and .ci/, Markdown aside (a new source folder
# needs no change here; what a user saves at the top, such as `run.sh demo --save step.json`,
# does not count); without git, the source folders.
build_inputs() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard -- CMakeLists.txt pyproject.toml \
      ':(glob)*/**' ':!tests' ':!benchmarks' ':!docs' ':!.ci' ':!*.md'
  else
    local dir
    for dir in CMakeLists.txt pyproject.toml cmake csrc torch_plugin bindings python weights; do
      [ -e "$dir" ] && find "$dir" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*.so' -print0
    done
  fi
  if [ -d third_party ]; then find third_party -type f -print0; fi  # ignored, read by CMake
}

# What an install is made of: the build's files, the Python and its torch, the warning setting.
# About 300 files: a fraction of a second.
source_stamp() {
  {
    build_inputs | LC_ALL=C sort -z | xargs -0 -r sha256sum 2>&1 || true
    "$PYTHON" -c 'import importlib.metadata as m, sys
try: torch = m.version("torch")
except m.PackageNotFoundError: torch = None
print(sys.executable, sys.version, "torch", torch)'
    echo "HABITAT_WERROR=${HABITAT_WERROR:-}"
  } | sha256sum | cut -d' ' -f1
}

# The stamp matches, and this Python's habitat is the one installed from this folder.
install_is_current() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$1" ] || return 1
  "$PYTHON" - "$PWD" <<'EOF' >/dev/null 2>&1
import importlib.metadata, json, pathlib, sys
url = json.loads(importlib.metadata.distribution("habitat").read_text("direct_url.json"))["url"]
sys.exit(url != pathlib.Path(sys.argv[1]).as_uri())
EOF
}

# ninja's progress lines from pip's log, one a line: "[12/61] habitat_engine: csrc/src/....cpp".
show_progress() {
  sed -u -n -E \
    -e 's|^ *(\[[0-9]+/[0-9]+\]) Building CXX object CMakeFiles/([^/]*)\.dir/(.*)\.o$|  \1 \2: \3|p' \
    -e 's|^ *(\[[0-9]+/[0-9]+\]) Linking CXX [a-z ]+ (.*)$|  \1 linking \2|p'
}

install_habitat() {
  local stamp log start pip_pid
  stamp=$(source_stamp)
  if install_is_current "$stamp"; then
    say "habitat is installed and up to date with these sources ($STAMP)"
    return 0
  fi
  mkdir -p "$BUILD_DIR"
  log="$BUILD_DIR/install.log"
  rm -f "$STAMP"
  if [ -f "$BUILD_DIR/build.ninja" ]; then
    say "installing habitat: compiling what changed since the last build (log: $log)"
  else
    say "building habitat's C++ extensions, once: about 4 CPU-minutes, so 2 minutes on 2 free"
    say "cores (a first \`run.sh test\` compiles the C++ tests while pytest runs; log: $log)"
  fi
  start=$SECONDS
  # pip -v passes the build's output through: ninja's [n/N] lines are shown, the rest logged.
  "$PYTHON" -m pip install -v --no-build-isolation --no-deps -C build-dir="$BUILD_DIR" . >"$log" 2>&1 &
  pip_pid=$!
  tail -n +1 -f --pid="$pip_pid" "$log" 2>/dev/null | show_progress
  if ! wait "$pip_pid"; then
    grep -E "error|Error|FAILED" "$log" | head -n 40 >&2 || true
    say "the build failed after $((SECONDS - start)) s; the whole log: $log" >&2
    exit 1
  fi
  (cd /tmp && "$PYTHON" -c "import habitat") || { say "habitat was installed but does not import" >&2; exit 1; }
  say "built and installed in $((SECONDS - start)) s"
  echo "$stamp" >"$STAMP"
}

# The C++ tests, in the folder pip configured (so the engine is not compiled again), with the
# same warning setting as that build.
build_cpp_tests() {
  cmake -S . -B "$BUILD_DIR" -G Ninja -DHABITAT_TESTS=ON -DHABITAT_WERROR="${HABITAT_WERROR:-OFF}" >/dev/null
  cmake --build "$BUILD_DIR" -j "$1"
}

# Whether the pytest arguments name a test file or folder (path or path::test).
names_test_paths() {
  local arg
  for arg in "$@"; do
    [[ "$arg" != -* && -e "${arg%%::*}" ]] && return 0
  done
  return 1
}

run_tests() {
  if names_test_paths "$@"; then
    "$PYTHON" -m pytest -q "$@"
    return
  fi
  # The whole suite. The C++ tests compile (one job, at low priority) while the Python suite
  # runs, so the tests start at once; CTest runs when both are done. The compile is a process
  # group of its own, stopped if this script ends first.
  local cpp_log="$BUILD_DIR/cpp-tests-build.log" cpp_pid status=0 built=0
  say "the C++ tests compile in the background (log: $cpp_log); CTest runs after pytest"
  set -m
  (renice -n 10 "$BASHPID" >/dev/null; build_cpp_tests 1) >"$cpp_log" 2>&1 &
  cpp_pid=$!
  set +m
  trap "kill -- -$cpp_pid 2>/dev/null || true" EXIT
  "$PYTHON" -m pytest -q "$@" || status=$?
  # 2: pytest was interrupted (Ctrl-C); the trap stops the compile.
  [ "$status" -eq 2 ] && return "$status"
  if kill -0 "$cpp_pid" 2>/dev/null; then
    # pytest is done and the compile is not: go on with every core. ninja resumes where the
    # one-job build stopped; only the file it was compiling is compiled again.
    kill -- -"$cpp_pid" 2>/dev/null || true
    wait "$cpp_pid" 2>/dev/null || true
    trap - EXIT
    say "pytest is done; the C++ tests go on compiling with $(nproc) jobs"
    build_cpp_tests "$(nproc)" >>"$cpp_log" 2>&1 || built=$?
  else
    wait "$cpp_pid" || built=$?
    trap - EXIT
  fi
  if [ "$built" -eq 0 ]; then
    ctest --test-dir "$BUILD_DIR" --output-on-failure || status=1
  else
    grep -E "error|FAILED" "$cpp_log" | head -n 40 >&2 || true
    say "the C++ tests failed to build; the whole log: $cpp_log" >&2
    status=1
  fi
  return "$status"
}

# For `run.sh test` only: headless Chromium, in which tests/python/present/test_report_browser.py
# lays out the HTML report (skipped without it, which CI refuses: tests/python/skips_allowed.txt).
# Habitat itself does not need it, so a failed install is said and the tests go on.
install_test_packages() {
  local browser
  for browser in chromium chromium-browser google-chrome; do  # benchmarks/ux/browser.py NAMES
    command -v "$browser" >/dev/null 2>&1 && return 0
  done
  say "installing chromium (headless, for the report's layout test; about 300 MB)"
  if ! { as_root apt-get update -qq &&
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; then
    say "could not install chromium: the report's browser test will be skipped"
  fi
}

case "$job" in
  demo | test) ;;
  *)
    echo "usage: bash run.sh [demo|test] [extra arguments]" >&2
    exit 2
    ;;
esac

install_system_packages
[ "$job" = test ] && install_test_packages
install_python_packages
install_habitat

case "$job" in
  demo)
    # From where the user is, so that `--save step.json` and the next steps it prints find the
    # file there; PYTHONSAFEPATH: a folder named habitat there is not imported instead.
    (cd "$CALLER_DIR" && PYTHONSAFEPATH=1 "$PYTHON" -m habitat.demo "$@")
    ;;
  test)
    run_tests "$@"
    ;;
esac
