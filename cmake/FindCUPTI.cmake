# Finds CUPTI (CUDA's profiling interface), its CUDA headers and NVTX.
#
# The one place that knows where CUPTI lives: CMakeLists.txt includes it (find_package(CUPTI)),
# and it can run in script mode to print what it finds:
#   cmake -DCUPTI_EXTRA_ROOTS="<dir>;<dir>" -P cmake/FindCUPTI.cmake
# prints CUPTI_INCLUDE_DIR=..., CUPTI_CUDA_INCLUDE_DIR=..., CUPTI_LIBRARY=..., NVTX_INCLUDE_DIR=...
#
# Searched: CUDA_HOME, CUDA_PATH, /usr/local/cuda (include/ and extras/CUPTI/), then the
# CUPTI_EXTRA_ROOTS given (cmake/HabitatPython.cmake passes the site-packages nvidia/ wheels' folders).
# Sets CUPTI_FOUND, CUPTI_INCLUDE_DIR, CUPTI_CUDA_INCLUDE_DIR, CUPTI_LIBRARY (may be empty:
# the headers alone let CI compile the tracer), NVTX_INCLUDE_DIR (may be empty).

set(_cupti_roots $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda ${CUPTI_EXTRA_ROOTS})
set(_cupti_hints)
foreach(_root IN LISTS _cupti_roots)
  list(APPEND _cupti_hints ${_root}/include ${_root}/extras/CUPTI/include)
endforeach()

find_path(CUPTI_INCLUDE_DIR cupti.h HINTS ${_cupti_hints})
if(CUPTI_INCLUDE_DIR)
  # cupti.h includes cuda.h, which lives in the toolkit's include/ (not extras/CUPTI).
  find_path(CUPTI_CUDA_INCLUDE_DIR cuda.h
            HINTS ${CUPTI_INCLUDE_DIR} ${CUPTI_INCLUDE_DIR}/../../../include ${_cupti_hints})
  find_library(CUPTI_LIBRARY NAMES cupti libcupti.so libcupti.so.13 libcupti.so.12
               HINTS ${CUPTI_INCLUDE_DIR}/../lib64 ${CUPTI_INCLUDE_DIR}/../lib)
  find_path(NVTX_INCLUDE_DIR nvtx3/nvToolsExt.h HINTS ${CUPTI_CUDA_INCLUDE_DIR} ${_cupti_hints})
endif()

if(CUPTI_INCLUDE_DIR AND CUPTI_CUDA_INCLUDE_DIR)
  set(CUPTI_FOUND TRUE)
else()
  set(CUPTI_FOUND FALSE)
endif()

if(CMAKE_SCRIPT_MODE_FILE)
  foreach(_var CUPTI_INCLUDE_DIR CUPTI_CUDA_INCLUDE_DIR CUPTI_LIBRARY NVTX_INCLUDE_DIR)
    if(${_var})
      message("${_var}=${${_var}}")
    endif()
  endforeach()
endif()
