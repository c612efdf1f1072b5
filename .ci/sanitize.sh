#!/usr/bin/env bash
# The engine's whole C++ suite (tests/cpp, CTest) under AddressSanitizer, LeakSanitizer and
# UBSan: CMake's HABITAT_SANITIZE build in build/sanitize, with clang at -O1 (-g for file:line in
# the reports). Any report fails its test, and so the script (docs/checks.md).
#   bash .ci/sanitize.sh [ctest arguments]     e.g. -R 'Trace\.' to run some tests only
# HABITAT_JOBS sets the build's parallelism (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG=${HABITAT_CLANG:-clang++-14}
jobs=${HABITAT_JOBS:-$(nproc)}
build=build/sanitize

# The sanitizer runtimes come with libclang-rt-14-dev, which clang-14 only recommends.
if ! command -v "$CLANG" >/dev/null 2>&1 || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.a >/dev/null 2>&1; then
  echo "[sanitize] installing clang and its sanitizer runtimes (clang-14, libclang-rt-14-dev)"
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
fi

t0=$SECONDS
# Debug: no NDEBUG (nlohmann's assertions stay on); -O1 keeps the instrumented build fast.
CXX="$CLANG" cmake -S . -B "$build" -G Ninja -DHABITAT_SANITIZE=ON -DHABITAT_TESTS=ON \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 >/dev/null
# The tests are discovered by running the instrumented binary, so the options apply already.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=report_objects=1
cmake --build "$build" -j "$jobs"
echo "[sanitize] build took $((SECONDS - t0)) s"

t1=$SECONDS
status=0
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@" || status=1
echo "[sanitize] tests took $((SECONDS - t1)) s"
exit $status
