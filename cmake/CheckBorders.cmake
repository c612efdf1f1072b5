# Fails when a source crosses a border of the layout (docs/architecture.md):
# - torch, ATen, c10 headers only in torch_plugin/capture and torch_plugin/bindings/plugin;
# - the plugin and all bindings include only the engine's public headers (csrc/include/habitat),
#   never its internals in csrc/src;
# - the engine (csrc) and the CUPTI client (torch_plugin/cupti) include no pybind11 either.
# Run as: cmake -DROOT=<repository> -P cmake/CheckBorders.cmake
file(GLOB_RECURSE _all RELATIVE ${ROOT} ${ROOT}/csrc/*.h ${ROOT}/csrc/*.cpp
     ${ROOT}/torch_plugin/*.h ${ROOT}/torch_plugin/*.cpp)
file(GLOB _engine_parts RELATIVE ${ROOT}/csrc/src ${ROOT}/csrc/src/*)
set(_failures)
foreach(_file IN LISTS _all)
  file(STRINGS ${ROOT}/${_file} _includes REGEX "^[ \t]*#[ \t]*include")
  foreach(_line IN LISTS _includes)
    if(_line MATCHES "[<\"](torch|ATen|c10)/")
      if(NOT _file MATCHES "^torch_plugin/(capture|bindings/plugin)/")
        list(APPEND _failures "${_file}: torch header outside torch_plugin/capture and bindings/plugin: ${_line}")
      endif()
    endif()
    if(_line MATCHES "[<\"]pybind11/" AND NOT _file MATCHES "^torch_plugin/bindings/")
      list(APPEND _failures "${_file}: pybind11 outside torch_plugin/bindings: ${_line}")
    endif()
    if(_file MATCHES "^torch_plugin/")
      foreach(_part IN LISTS _engine_parts)
        if(_line MATCHES "\"${_part}/")
          list(APPEND _failures "${_file}: engine internal header (use csrc/include/habitat): ${_line}")
        endif()
      endforeach()
    endif()
  endforeach()
endforeach()
if(_failures)
  list(JOIN _failures "\n" _text)
  message(FATAL_ERROR "layout border crossed:\n${_text}")
endif()
message(STATUS "layout borders hold for ${ROOT}")
