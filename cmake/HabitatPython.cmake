# The Python extension modules, built by `pip install` (scikit-build-core runs CMake with
# HABITAT_PYTHON=ON) and installed into the wheel's habitat/ package:
# - habitat._engine: the torch-free engine's bindings; links no libtorch, built with or without
#   torch (pybind11's headers come from torch when it is installed, else from `pip install
#   pybind11`).
# - habitat._C: the capture plugin (dispatch-key fallback, CUPTI, NVTX), only when torch is
#   installed, against that torch: its ABI and dispatch keys must match at run time.
# Both link the one habitat_engine library that the C++ tests link too.
find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)

set(_info ${CMAKE_CURRENT_BINARY_DIR}/python_build_info.cmake)
execute_process(COMMAND ${Python_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/python_build_info.py ${_info}
                ERROR_VARIABLE _info_err RESULT_VARIABLE _info_rc)
if(NOT _info_rc EQUAL 0)
  message(FATAL_ERROR "${_info_err}")
elseif(_info_err)
  message(WARNING "${_info_err}")
endif()
include(${_info})

if(TORCH_VERSION)
  # A captured step crosses from _C to _engine as C++ structs: the engine, both modules and
  # everything linked into them use torch's std::string ABI.
  target_compile_definitions(habitat_engine PUBLIC _GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})
endif()

python_add_library(_engine MODULE WITH_SOABI ${HABITAT_ENGINE_BINDING_SOURCES})
target_include_directories(_engine PRIVATE ${HABITAT_BINDINGS_INCLUDE_DIRS} ${PYBIND11_INCLUDE_DIR})
target_compile_options(_engine PRIVATE ${HABITAT_WARNINGS})
target_link_libraries(_engine PRIVATE habitat_engine)
install(TARGETS _engine LIBRARY DESTINATION habitat)
# Every binding and plugin source parses pybind11 (and the plugin's, torch's ~4,500 headers) and
# instantiates the same templates: compiled in batches of 4 (unity builds) the two modules cost
# less than half the CPU time (docs/building.md). The price: a name in an anonymous namespace must
# be unique across the sources of a module, and an edit recompiles its whole batch;
# -DHABITAT_UNITY_BUILD=OFF compiles file by file.
set_target_properties(_engine PROPERTIES UNITY_BUILD ${HABITAT_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 4)
# What `pip install` builds (pyproject.toml's build.targets): the modules, not the C++ tests.
add_custom_target(habitat_python DEPENDS _engine)

# habitat/__init__ names the torch this build's _C was compiled against when _C fails to load.
if(TORCH_VERSION)
  set(HABITAT_BUILT_WITH_TORCH "'${TORCH_VERSION}'")
else()
  set(HABITAT_BUILT_WITH_TORCH None)
endif()
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/_build_info.py CONTENT
     "\"\"\"Written by the build: the torch habitat._C was built against (None: engine only).\"\"\"\nTORCH_VERSION = @HABITAT_BUILT_WITH_TORCH@\n"
     @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/_build_info.py DESTINATION habitat)

if(NOT TORCH_VERSION)
  message(STATUS "habitat: torch is not installed, so only the engine (habitat._engine) is built: "
                 "traces can be forecast, compared and reported; install torch and rebuild to "
                 "capture training steps")
  return()
endif()
message(STATUS "habitat: building habitat._C against torch ${TORCH_VERSION}")

python_add_library(_C MODULE WITH_SOABI ${HABITAT_PLUGIN_SOURCES})
# -I, not -isystem, as torch's BuildExtension passes them: .ci/torch_headers.sh checks the
# plugin against older and newer torch headers with the same warnings.
target_include_directories(_C PRIVATE ${HABITAT_BINDINGS_INCLUDE_DIRS} ${TORCH_INCLUDE_DIRS})
target_compile_definitions(_C PRIVATE TORCH_API_INCLUDE_EXTENSION_H TORCH_EXTENSION_NAME=_C
                           ${TORCH_PYBIND11_MACROS})
target_compile_options(_C PRIVATE ${HABITAT_WARNINGS} -Wno-unused-parameter)
target_link_directories(_C PRIVATE ${TORCH_LIBRARY_DIRS})
# The libraries torch.utils.cpp_extension.CppExtension links; `import torch` has loaded them
# before habitat._C is imported, so no RPATH points at them.
target_link_libraries(_C PRIVATE habitat_engine c10 torch torch_cpu torch_python)
install(TARGETS _C LIBRARY DESTINATION habitat)
set_target_properties(_C PROPERTIES UNITY_BUILD ${HABITAT_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 4)
add_dependencies(habitat_python _C)

# CUPTI kernel tracing and NVTX ranges: for a CUDA build of torch, unless HABITAT_NO_CUPTI=1.
if(TORCH_CUDA AND NOT "$ENV{HABITAT_NO_CUPTI}")
  find_package(CUPTI)  # searches CUPTI_EXTRA_ROOTS too: the nvidia/ wheels beside torch
endif()
if(TORCH_CUDA AND NOT "$ENV{HABITAT_NO_CUPTI}" AND CUPTI_FOUND)
  target_include_directories(_C PRIVATE ${CUPTI_INCLUDE_DIR} ${CUPTI_CUDA_INCLUDE_DIR})
  target_compile_definitions(_C PRIVATE HABITAT_WITH_CUPTI=1)
  if(CUPTI_LIBRARY)
    get_filename_component(_cupti_dir ${CUPTI_LIBRARY} DIRECTORY)
    target_link_libraries(_C PRIVATE ${CUPTI_LIBRARY})
    set_target_properties(_C PROPERTIES INSTALL_RPATH ${_cupti_dir})
  endif()
  if(NVTX_INCLUDE_DIR)
    target_include_directories(_C PRIVATE ${NVTX_INCLUDE_DIR})
    target_compile_definitions(_C PRIVATE HABITAT_WITH_NVTX=1)
  endif()
  message(STATUS "habitat: CUPTI kernel tracing compiled in (${CUPTI_INCLUDE_DIR})")
elseif(TORCH_CUDA)
  message(STATUS "habitat: CUPTI not compiled in (HABITAT_NO_CUPTI set, or cupti.h not found: "
                 "set CUDA_HOME)")
endif()
