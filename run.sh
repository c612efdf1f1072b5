#!/usr/bin/env bash
# Sets Habitat up on a fresh Linux machine, then runs one job:
#   bash run.sh demo   forecast a training step of a bundled model for several GPUs
#   bash run.sh test   run the C++ (GoogleTest/CTest) and Python (pytest) suites
# Set-up is idempotent: what is already installed is kept (including a CUDA torch).
set -euo pipefail
cd "$(dirname "$0")"

job=${1:-demo}
shift || true
PYTHON=${PYTHON:-python3}
TORCH_VERSION=${HABITAT_TORCH_VERSION:-2.13.0}
BUILD_DIR=${HABITAT_BUILD_DIR:-build/cmake}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

install_system_packages() {
  local missing=()
  for pkg in cmake g++ ninja-build libgtest-dev nlohmann-json3-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "[habitat] installing system packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

install_python_packages() {
  # Keep whatever torch is already installed (a CUDA build on a GPU machine). Otherwise pin a
  # release: where pip is set up with a CPU wheel (a CPU index or a local wheelhouse) that is
  # the CPU build; elsewhere pip takes PyPI's default, the CUDA build (README: "Which torch").
  if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
    echo "[habitat] installing torch==$TORCH_VERSION"
    "$PYTHON" -m pip install -q "torch==$TORCH_VERSION"
  fi
  local need=()
  for mod in tensorboard matplotlib pytest numpy ninja scikit_build_core hypothesis; do
    "$PYTHON" -c "import $mod" >/dev/null 2>&1 || need+=("${mod//_/-}")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "[habitat] installing Python packages: ${need[*]}"
    "$PYTHON" -m pip install -q "${need[@]}"
  fi
}

install_habitat() {
  echo "[habitat] building and installing the habitat package (torch extension habitat._C)"
  # The build folder is the one the C++ tests are built in: the engine is compiled once for both.
  "$PYTHON" -m pip install -q --no-build-isolation --no-deps -C build-dir="$BUILD_DIR" . 2>&1 \
    | grep -v "Running pip as the 'root'" || true
  "$PYTHON" -c "import habitat" || { echo "[habitat] the package failed to build or import" >&2; exit 1; }
}

build_cpp_tests() {
  # The folder pip configured, with the tests on; the same warning setting as that build (or the
  # engine would be compiled again).
  cmake -S . -B "$BUILD_DIR" -G Ninja -DHABITAT_TESTS=ON -DHABITAT_WERROR="${HABITAT_WERROR:-OFF}" >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)"
}

install_system_packages
install_python_packages
install_habitat

case "$job" in
  demo)
    (cd /tmp && "$PYTHON" -m habitat.demo "$@")
    ;;
  test)
    build_cpp_tests
    ctest --test-dir "$BUILD_DIR" --output-on-failure
    "$PYTHON" -m pytest tests/python -q "$@"
    ;;
  *)
    echo "usage: bash run.sh [demo|test] [extra arguments]" >&2
    exit 2
    ;;
esac
