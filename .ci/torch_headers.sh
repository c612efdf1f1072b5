#!/usr/bin/env bash
# Compile-checks the torch-facing C++ sources of the extension against the headers of the oldest
# and the newest supported torch (2.4.0 and 2.15.0), with -Werror, without installing either:
#   bash .ci/torch_headers.sh              # both versions
#   bash .ci/torch_headers.sh 2.15.0       # only some
#
# Headers come from the PyPI wheel (the Linux x86_64 wheels are CUDA builds): the first run
# downloads each wheel once (about 1.3 GB for the two: 2.15.0 is 539 MB, 2.4.0+cu121 about
# 800 MB), keeps only torch/include/**, torch/version.py and the C++ ABI flag (51 MB for 2.4.0,
# 63 MB for 2.15.0) and deletes the wheel. Later runs use the cache and download nothing.
# Measured on the 2-core dev VM (shared, load 1-5): fetching one wheel and extracting its
# headers took 8-85 s (network); compiling the 13 sources 30-80 s per version with GCC 12,
# 25-75 s with clang 15; the whole script, cached, 1 min 24 s - 2 min 31 s (GCC 12) and
# 58 s - 1 min 58 s (clang 15); a first run adds the two downloads.
#   cache:        ${HABITAT_CI_CACHE:-$HOME/.cache/habitat-ci}/torch-X/   (include/, version.py, abi)
#   clear it:     rm -rf "${HABITAT_CI_CACHE:-$HOME/.cache/habitat-ci}"/torch-*
#   one version:  rm -rf "${HABITAT_CI_CACHE:-$HOME/.cache/habitat-ci}"/torch-2.4.0
# In CI, keep that directory between runs (or point HABITAT_CI_CACHE at a persistent volume).
#
# Compiler: $CXX (default g++), -std=c++20 -fsyntax-only, the same warning flags as a -Werror
# build. The _GLIBCXX_USE_CXX11_ABI value is read from each wheel's TorchConfig.cmake
# (0 for the 2.4 pip wheels, 1 for 2.15).
# Sources: every torch_plugin/**/*.cpp (capture, cupti) and bindings/**/*.cpp (plugin, engine:
# both compile against torch's pybind11 when torch is installed). CUPTI is not compiled in (the
# stub path), as in a CPU build.
# Prints one "torch X: OK|FAIL" line per version; exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

CACHE="${HABITAT_CI_CACHE:-$HOME/.cache/habitat-ci}"
CXX="${CXX:-g++}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
PYTHON="${PYTHON:-python3}"
VERSIONS=("$@")
[[ ${#VERSIONS[@]} -gt 0 ]] || VERSIONS=(2.4.0 2.15.0)

fetch_headers() {  # $1 = version; fills $CACHE/torch-$1 unless it is already there
  local ver="$1" dir="$CACHE/torch-$1"
  [[ -f "$dir/.complete" ]] && return 0
  rm -rf "$dir" && mkdir -p "$dir/wheel" || return 1
  echo "torch $ver: downloading the wheel once (headers only are kept) into $dir" >&2
  # The machine's pip config may cap torch (constraints) or point at local mirrors: ask PyPI.
  # The headers do not depend on the Python version: take the cp311 wheel, which every release
  # from 2.4 to 2.15 has, whatever Python runs this.
  if ! PIP_CONFIG_FILE=/dev/null PIP_CONSTRAINT= "$PYTHON" -m pip download --quiet "torch==$ver" \
      --no-deps --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 \
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux1_x86_64 -d "$dir/wheel" >&2; then
    echo "torch $ver: download failed" >&2
    return 1
  fi
  "$PYTHON" - "$dir" <<'EOF' || return 1
import glob, re, sys, zipfile
out = sys.argv[1]
wheel = glob.glob(f"{out}/wheel/torch-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist()
             if n.startswith("torch/include/") or n == "torch/version.py"
             or n.endswith("share/cmake/Torch/TorchConfig.cmake")]
    for n in names:
        z.extract(n, out)
cfg = glob.glob(f"{out}/torch/share/cmake/Torch/TorchConfig.cmake")
abi = "1"
if cfg:
    m = re.search(r"_GLIBCXX_USE_CXX11_ABI=(\d)", open(cfg[0]).read())
    abi = m.group(1) if m else abi
open(f"{out}/abi", "w").write(abi + "\n")
EOF
  mv "$dir/torch/include" "$dir/include" && mv "$dir/torch/version.py" "$dir/version.py" || return 1
  rm -rf "$dir/wheel" "$dir/torch"
  touch "$dir/.complete"
}

# Every source under torch_plugin/ and bindings/ is compiled into an extension against torch's
# include dir (pybind11 included), with setup.py's include dirs.
mapfile -t sources < <(find torch_plugin bindings -name '*.cpp' | sort)
if [[ ${#sources[@]} -eq 0 ]]; then echo "no sources under torch_plugin/ or bindings/" >&2; exit 1; fi
includes=()
for d in csrc/include csrc/src torch_plugin . third_party/include; do [[ -d "$d" ]] && includes+=("-I$d"); done
py_inc="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"

status=0
for ver in "${VERSIONS[@]}"; do
  t0=$(date +%s)
  if ! fetch_headers "$ver"; then
    echo "torch $ver: FAIL (could not get the headers)"
    status=1
    continue
  fi
  t1=$(date +%s)
  dir="$CACHE/torch-$ver"
  abi="$(cat "$dir/abi")"
  log="$(mktemp)"
  flags=(-std=c++20 -fsyntax-only -Wall -Wextra -Werror -Wno-unused-parameter
         "-D_GLIBCXX_USE_CXX11_ABI=$abi" -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C
         "-I$dir/include" "-I$dir/include/torch/csrc/api/include" "-I$py_inc" "${includes[@]}")
  # -I, not -isystem, as the build passes them (cmake/HabitatPython.cmake): with HABITAT_WERROR=1
  # a warning inside torch's headers would fail that build too, so it must fail here.
  export CXX
  printf '%s\n' "${sources[@]}" | xargs -P "$JOBS" -I{} sh -c \
    'out=$("$0" "$@" {} 2>&1) || { printf "%s\n" "$out"; echo "HABITAT-FAILED {}"; }' \
    "$CXX" "${flags[@]}" >"$log" 2>&1
  failed=$(grep -c '^HABITAT-FAILED' "$log")
  t2=$(date +%s)
  info="$($CXX --version | head -1), ABI=$abi, headers $((t1 - t0)) s, compile $((t2 - t1)) s"
  if [[ "$failed" -eq 0 ]]; then
    echo "torch $ver: OK (${#sources[@]} sources; $info)"
  else
    grep -v '^HABITAT-FAILED' "$log"
    echo "torch $ver: FAIL ($failed of ${#sources[@]} sources: $(grep '^HABITAT-FAILED' "$log" | cut -d' ' -f2 | tr '\n' ' '); $info)"
    status=1
  fi
  rm -f "$log"
done
exit $status
