#!/usr/bin/env bash
# The libFuzzer targets of the trace and device readers (tests/fuzz/README.md), built with
# clang, AddressSanitizer and UBSan, each run for SECONDS (default 20) from the committed
# corpus: briefly in CI, longer on demand (bash .ci/fuzz.sh 3600). New inputs go to a
# scratch folder; copy the interesting ones into tests/fuzz/corpus/<reader>/ to keep them.
# A crash fails the script and leaves its input in build/fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
CLANG=${HABITAT_CLANG:-clang++-14}

if ! command -v "$CLANG" >/dev/null 2>&1 || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "[fuzz] installing clang and libFuzzer (clang-14, libclang-rt-14-dev)"
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
fi

build=build/fuzz
CXX="$CLANG" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHABITAT_FUZZ=ON >/dev/null
cmake --build "$build" --target fuzz_trace_reader fuzz_device_reader -j "$(nproc)"

mkdir -p "$build/crashes"
status=0
for reader in trace_reader device_reader; do
  corpus=tests/fuzz/corpus/${reader%_reader}
  [ "$reader" = device_reader ] && corpus=tests/fuzz/corpus/devices
  scratch=$(mktemp -d)
  echo "[fuzz] $reader for ${seconds}s from $corpus"
  if ! "$build/fuzz_$reader" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -dict=tests/fuzz/json.dict -artifact_prefix="$build/crashes/$reader-" \
      -print_final_stats=1 "$scratch" "$corpus" 2>"$build/$reader.log"; then
    echo "[fuzz] $reader FAILED: see $build/$reader.log and $build/crashes/" >&2
    tail -40 "$build/$reader.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/$reader.log" | sed "s/^/[fuzz] $reader /"
  fi
  rm -rf "$scratch"
done
exit $status
