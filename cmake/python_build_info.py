"""Writes what CMake needs to build habitat's extension modules for the Python running it, as
`set()` commands into the file named by its argument; cmake/HabitatPython.cmake includes it.

- `habitat._engine` needs pybind11's headers: torch's copy when torch is installed (both
  extensions then share pybind11's internals with torch), else the `pybind11` package's.
- `habitat._C` is built only with torch, against that torch: its headers, libraries, std::string
  ABI and (torch releases that still name them) pybind11 ABI macros, as
  torch.utils.cpp_extension.CppExtension and BuildExtension would set them.

Exits non-zero with an actionable message when the build cannot go on (an unsupported torch, no
pybind11 at all); a torch newer than the supported range is a warning on stderr.
"""
from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _supported_torch() -> tuple[tuple[int, int], tuple[int, int]]:
    # The one source of the range, read without importing habitat (it needs its extensions).
    info: dict = {}
    exec((ROOT / "python/habitat/_version.py").read_text(), info)
    return info["SUPPORTED_TORCH"]


def _check_version(torch_version: str) -> None:
    low, high = _supported_torch()
    version = tuple(int(x) for x in re.findall(r"\d+", torch_version)[:2])
    supported = f"{low[0]}.{low[1]} to {high[0]}.{high[1]}"
    if version < low:
        sys.exit(f"habitat supports torch {supported}; this is torch {torch_version}: "
                 f"pip install 'torch>={low[0]}.{low[1]}', then build habitat again")
    if version > high:
        print(f"habitat: torch {torch_version} is newer than the newest release habitat was "
              f"checked against ({supported}); building anyway", file=sys.stderr)


def _nvidia_roots() -> list[str]:
    # CUDA wheels from PyPI ship CUPTI, the CUDA headers and NVTX under site-packages/nvidia/.
    return [str(Path(site) / "nvidia" / sub)
            for site in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
                               | {p for p in sys.path if p.endswith("site-packages")})
            for sub in ("cu13", "cuda_cupti", "cuda_runtime", "nvtx")]


def _torch_settings(torch) -> dict[str, str | list[str]]:
    from torch.utils.cpp_extension import CUDA_HOME, include_paths, library_paths

    _check_version(torch.__version__)
    # BuildExtension of torch before 2.9 defines these so the extension's pybind11 internals
    # match torch's; later releases leave that to pybind11 and no longer expose them.
    pybind_macros = [f'PYBIND11_{name}="{value}"' for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI")
                     if (value := getattr(torch._C, f"_PYBIND11_{name}", None)) is not None]
    roots = ([CUDA_HOME] if CUDA_HOME else []) + _nvidia_roots()
    return {"TORCH_VERSION": torch.__version__,
            "TORCH_CUDA": torch.version.cuda or "",
            "TORCH_CXX11_ABI": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
            "TORCH_INCLUDE_DIRS": include_paths(),
            "TORCH_LIBRARY_DIRS": library_paths(),
            "TORCH_PYBIND11_MACROS": pybind_macros,
            "PYBIND11_INCLUDE_DIR": include_paths()[0],
            "CUPTI_EXTRA_ROOTS": roots}


def _settings() -> dict[str, str | list[str]]:
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        return _torch_settings(torch)
    try:
        import pybind11
    except ImportError:
        sys.exit("building habitat without torch needs pybind11: pip install pybind11 "
                 "(or install torch first to also build the capture plugin)")
    return {"TORCH_VERSION": "", "PYBIND11_INCLUDE_DIR": pybind11.get_include()}


def _cmake_quoted(value: str | list[str]) -> str:
    text = value if isinstance(value, str) else ";".join(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def main() -> None:
    lines = [f"set({name} {_cmake_quoted(value)})" for name, value in _settings().items()]
    Path(sys.argv[1]).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
