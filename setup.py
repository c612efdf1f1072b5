"""Builds the `habitat` package and its torch extension `habitat._C`.

Install with `pip install --no-build-isolation .` so the extension compiles against the
torch already installed (its ABI and dispatch-key numbering must match at run time).
"""
from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

from setuptools import find_packages, setup

try:
    import torch
    from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension
except ImportError:  # pragma: no cover - guidance for a user who skipped step one
    sys.exit("habitat needs torch installed first: pip install torch, then "
             "pip install --no-build-isolation .")

ROOT = Path(__file__).parent.resolve()


def _find_header(name: str, candidates: list[Path]) -> Path | None:
    for directory in candidates:
        if (directory / name).is_file():
            return directory
    return None


def _cupti_config() -> tuple[list[str], list[str], list[str], list[tuple[str, str]]]:
    """Include dirs, library dirs, libraries and macros for CUPTI, if it can be used.

    CUPTI is compiled in only for a CUDA build of torch with CUPTI headers present:
    a CPU-only torch can never launch kernels, so there is nothing to trace.
    """
    if os.environ.get("HABITAT_NO_CUPTI") or torch.version.cuda is None:
        return [], [], [], []
    roots = [Path(p) for p in (CUDA_HOME, "/usr/local/cuda") if p]
    site = [Path(p) for p in sys.path if p.endswith("site-packages")]
    includes = [r / "include" for r in roots] + [r / "extras/CUPTI/include" for r in roots]
    includes += [s / "nvidia/cu13/include" for s in site] + [s / "nvidia/cuda_cupti/include" for s in site]
    inc = _find_header("cupti.h", includes)
    if inc is None:
        return [], [], [], []
    lib_dirs = [str(inc.parent / "lib64"), str(inc.parent / "lib")]
    return [str(inc)], lib_dirs, ["cupti"], [("HABITAT_WITH_CUPTI", "1")]


def _json_include() -> list[str]:
    inc = _find_header("nlohmann/json.hpp",
                       [ROOT / "third_party/include", Path("/usr/include"), Path("/usr/local/include")])
    if inc is None:
        sys.exit("nlohmann/json.hpp not found: apt-get install nlohmann-json3-dev "
                 "(or copy its include/ tree to third_party/include)")
    return [str(inc)]


cupti_inc, cupti_libdirs, cupti_libs, cupti_macros = _cupti_config()
sources = sorted(glob.glob("csrc/*.cpp") + glob.glob("torch_plugin/*.cpp"))
nvtx_inc = _find_header("nvtx3/nvToolsExt.h", [Path(CUDA_HOME or "/usr/local/cuda") / "include"])

extension = CppExtension(
    name="habitat._C",
    sources=sources,
    include_dirs=[str(ROOT / "csrc"), str(ROOT / "torch_plugin")] + _json_include() + cupti_inc
    + ([str(nvtx_inc)] if nvtx_inc and cupti_macros else []),
    library_dirs=cupti_libdirs,
    libraries=cupti_libs,
    runtime_library_dirs=[d for d in cupti_libdirs if os.path.isdir(d)],
    define_macros=cupti_macros + ([("HABITAT_WITH_NVTX", "1")] if nvtx_inc and cupti_macros else []),
    extra_compile_args=["-std=c++20", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"],
)

setup(
    name="habitat",
    version="0.1.0",
    description="Forecast PyTorch training step time on GPUs you do not have",
    package_dir={"": "python", "habitat.weights": "weights"},
    packages=find_packages("python") + ["habitat.weights"],
    package_data={"habitat": ["data/*.json"],
                  "habitat.weights": ["*.json", "*.safetensors", "*.md", "NEUSIGHT-LICENSE",
                                      "logo/*/*.json", "logo/*/*.safetensors"]},
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.9",
    entry_points={"console_scripts": ["habitat=habitat.cli:main"]},
)
