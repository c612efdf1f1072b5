"""Builds the `habitat` package and its two extension modules.

- `habitat._engine`: the torch-free prediction engine (csrc/) and its bindings. It links no
  libtorch, so traces can be forecast, compared and reported where torch is not installed.
- `habitat._C`: the capture plugin (dispatch-key fallback, CUPTI, NVTX); built only when
  torch is installed, against that torch (its ABI and dispatch keys must match at run time).

Install with `pip install --no-build-isolation .` so both compile against the torch already
installed. Without torch, only `habitat._engine` is built (it needs `pip install pybind11`).
Warnings are errors only when HABITAT_WERROR=1 (the project's CI and developers), never in a
user's build.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup

ROOT = Path(__file__).parent.resolve()
# The version and the supported torch releases, from their one source (without importing the
# package, which needs its extensions).
_VERSION_INFO: dict = {}
exec((ROOT / "python/habitat/_version.py").read_text(), _VERSION_INFO)
VERSION = _VERSION_INFO["__version__"]
MIN_TORCH, MAX_TORCH = _VERSION_INFO["SUPPORTED_TORCH"]

try:
    import torch
except ImportError:
    torch = None


def _sources(*patterns: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for pattern in patterns for p in ROOT.glob(pattern))


def _warning_flags() -> list[str]:
    flags = ["-Wall", "-Wextra"]
    if os.environ.get("HABITAT_WERROR") == "1":
        flags.append("-Werror")
    return flags


def _json_include() -> str:
    for d in (ROOT / "third_party/include", Path("/usr/include"), Path("/usr/local/include")):
        if (d / "nlohmann/json.hpp").is_file():
            return str(d)
    sys.exit("nlohmann/json.hpp not found: apt-get install nlohmann-json3-dev "
             "(or copy its include/ tree to third_party/include)")


def _pybind11_include() -> str:
    if torch is not None:  # the same pybind11 _C is built with
        from torch.utils.cpp_extension import include_paths
        return include_paths()[0]
    try:
        import pybind11
    except ImportError:
        sys.exit("building habitat without torch needs pybind11: pip install pybind11 "
                 "(or install torch first to also build the capture plugin)")
    return pybind11.get_include()


def _cupti() -> dict[str, str]:
    """CUPTI, CUDA and NVTX locations from cmake/FindCUPTI.cmake (the one search CMake uses
    too); empty for a CPU build of torch, HABITAT_NO_CUPTI=1, or when cmake is missing."""
    if torch is None or torch.version.cuda is None or os.environ.get("HABITAT_NO_CUPTI"):
        return {}
    cmake = shutil.which("cmake")
    if cmake is None:
        print("habitat: cmake not found, so CUPTI kernel tracing is not compiled in "
              "(install cmake and rebuild to trace kernels on the GPU)", file=sys.stderr)
        return {}
    from torch.utils.cpp_extension import CUDA_HOME

    extra = [p for p in sys.path if p.endswith("site-packages")]
    roots = [str(Path(s) / "nvidia" / sub) for s in extra for sub in ("cu13", "cuda_cupti", "cuda_runtime", "nvtx")]
    if CUDA_HOME:
        roots.insert(0, CUDA_HOME)
    out = subprocess.run([cmake, f"-DCUPTI_EXTRA_ROOTS={';'.join(roots)}", "-P",
                          str(ROOT / "cmake/FindCUPTI.cmake")], capture_output=True, text=True)
    found = dict(line.split("=", 1) for line in (out.stdout + out.stderr).splitlines() if "=" in line)
    return found if "CUPTI_INCLUDE_DIR" in found and "CUPTI_CUDA_INCLUDE_DIR" in found else {}


def _abi_macros() -> list[tuple[str, str]]:
    # A captured step crosses from _C to _engine as C++ structs: both must use torch's
    # std::string ABI.
    if torch is None:
        return []
    return [("_GLIBCXX_USE_CXX11_ABI", str(int(torch._C._GLIBCXX_USE_CXX11_ABI)))]


COMMON_ARGS = ["-std=c++20", "-O2", "-fvisibility=hidden"]
ENGINE_SOURCES = _sources("csrc/src/**/*.cpp")
extensions = [
    Extension(
        name="habitat._engine",
        sources=ENGINE_SOURCES + _sources("torch_plugin/bindings/engine/*.cpp"),
        include_dirs=[str(ROOT / d) for d in ("csrc/include", "csrc/src", "torch_plugin")]
        + [_json_include(), _pybind11_include()],
        define_macros=_abi_macros(),
        extra_compile_args=COMMON_ARGS + _warning_flags(),
        language="c++",
    )
]
cmdclass = {}

if torch is not None:
    version = tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2])
    supported = f"{MIN_TORCH[0]}.{MIN_TORCH[1]} to {MAX_TORCH[0]}.{MAX_TORCH[1]}"
    if version < MIN_TORCH:
        sys.exit(f"habitat supports torch {supported}; this is torch {torch.__version__}: "
                 f"pip install 'torch>={MIN_TORCH[0]}.{MIN_TORCH[1]}', then build habitat again")
    if version > MAX_TORCH:
        print(f"habitat: torch {torch.__version__} is newer than the newest release habitat was "
              f"checked against ({supported}); building anyway", file=sys.stderr)
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    cupti = _cupti()
    macros = _abi_macros()
    include_dirs = [str(ROOT / d) for d in ("csrc/include", "torch_plugin")] + [_json_include()]
    libs, lib_dirs = [], []
    if cupti:
        include_dirs += sorted({cupti["CUPTI_INCLUDE_DIR"], cupti["CUPTI_CUDA_INCLUDE_DIR"]})
        macros.append(("HABITAT_WITH_CUPTI", "1"))
        if "CUPTI_LIBRARY" in cupti:
            lib_dirs.append(str(Path(cupti["CUPTI_LIBRARY"]).parent))
        libs.append("cupti")
        if "NVTX_INCLUDE_DIR" in cupti:
            include_dirs.append(cupti["NVTX_INCLUDE_DIR"])
            macros.append(("HABITAT_WITH_NVTX", "1"))
    # The capture needs only the trace structs and the kernel matching of the engine.
    plugin_engine = _sources("csrc/src/trace/trace.cpp", "csrc/src/trace/interned_string.cpp",
                             "csrc/src/hardware/precision.cpp",
                             "csrc/src/kernels/*.cpp", "csrc/src/cost/fused_cost.cpp")
    extensions.append(CppExtension(
        name="habitat._C",
        sources=plugin_engine + _sources("torch_plugin/capture/*.cpp", "torch_plugin/cupti/*.cpp",
                                         "torch_plugin/bindings/plugin/*.cpp"),
        include_dirs=include_dirs + [str(ROOT / "csrc/src")],
        library_dirs=lib_dirs,
        libraries=libs,
        runtime_library_dirs=lib_dirs,
        define_macros=macros,
        extra_compile_args=COMMON_ARGS + _warning_flags() + ["-Wno-unused-parameter"],
    ))
    cmdclass["build_ext"] = BuildExtension
else:
    print("habitat: torch is not installed, so only the engine (habitat._engine) is built: "
          "traces can be forecast, compared and reported; install torch and rebuild to capture "
          "training steps", file=sys.stderr)

# habitat/__init__ names the torch this build's _C was compiled against when _C fails to load.
(ROOT / "python/habitat/_build_info.py").write_text(
    '"""Generated by setup.py: the torch habitat._C was built against (None: engine only)."""\n'
    f"TORCH_VERSION = {None if torch is None else torch.__version__!r}\n")

setup(
    name="habitat",
    version=VERSION,
    description="Forecast PyTorch training step time on GPUs you do not have",
    package_dir={"": "python", "habitat.weights": "weights"},
    packages=find_packages("python") + ["habitat.weights"],
    package_data={"habitat": ["data/*.json"],
                  "habitat.weights": ["*.json", "*.safetensors", "*.md", "NEUSIGHT-LICENSE",
                                      "logo/*/*.json", "logo/*/*.safetensors"]},
    ext_modules=extensions,
    cmdclass=cmdclass,
    python_requires=">=3.9",
    entry_points={"console_scripts": ["habitat=habitat.cli:main"]},
)
