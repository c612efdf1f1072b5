# Fails when a source crosses a border of the layout (docs/architecture.md):
# - torch, ATen, c10 headers only in torch_plugin/capture (the _C bindings reach torch through
#   its headers);
# - pybind11 only in bindings/: the engine (csrc) and the plugin (torch_plugin) know no Python;
# - the plugin and all bindings include only the engine's public headers (csrc/include/habitat),
#   never its internals in csrc/src;
# - the torch-free module's bindings (bindings/engine) include nothing of the plugin
#   (torch_plugin/capture, torch_plugin/cupti).
# Run as: cmake -DROOT=<repository> -P cmake/CheckBorders.cmake
file(GLOB_RECURSE _all RELATIVE ${ROOT} ${ROOT}/csrc/*.h ${ROOT}/csrc/*.cpp
     ${ROOT}/torch_plugin/*.h ${ROOT}/torch_plugin/*.cpp ${ROOT}/bindings/*.h ${ROOT}/bindings/*.cpp)
file(GLOB _engine_parts RELATIVE ${ROOT}/csrc/src ${ROOT}/csrc/src/*)
set(_failures)
foreach(_file IN LISTS _all)
  file(STRINGS ${ROOT}/${_file} _includes REGEX "^[ \t]*#[ \t]*include")
  foreach(_line IN LISTS _includes)
    if(_line MATCHES "[<\"](torch|ATen|c10)/" AND NOT _file MATCHES "^torch_plugin/capture/")
      list(APPEND _failures "${_file}: torch header outside torch_plugin/capture: ${_line}")
    endif()
    if(_line MATCHES "[<\"]pybind11/" AND NOT _file MATCHES "^bindings/")
      list(APPEND _failures "${_file}: pybind11 outside bindings/: ${_line}")
    endif()
    if(_file MATCHES "^(torch_plugin|bindings)/")
      foreach(_part IN LISTS _engine_parts)
        if(_line MATCHES "\"${_part}/")
          list(APPEND _failures "${_file}: engine internal header (use csrc/include/habitat): ${_line}")
        endif()
      endforeach()
    endif()
    if(_file MATCHES "^bindings/engine/" AND _line MATCHES "\"(capture|cupti)/")
      list(APPEND _failures "${_file}: the torch-free _engine includes the plugin: ${_line}")
    endif()
  endforeach()
endforeach()
if(_failures)
  list(JOIN _failures "\n" _text)
  message(FATAL_ERROR "layout border crossed:\n${_text}")
endif()
message(STATUS "layout borders hold for ${ROOT}")
