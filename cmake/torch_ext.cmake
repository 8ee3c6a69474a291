# The C++ half of the torch backend (python/collie/torch/_ext, docs/torch.md,
# "The C++ fast path"): built against the torch that COLLIE_PYTHON imports,
# into the build directory, where collie.torch finds it next to libcollie.so.
# AUTO builds it when that torch has its C++ headers (Debian: libtorch-dev;
# pip wheels ship them) and is a 1.x (the torch 2.x form, a c10d::Backend, has
# not been compiled against a 2.x yet: ON builds it, scripts/gpu_check.sh's
# torch_fast step tries it), and never in a sanitizer build (the interpreter
# would have to load the sanitizer runtime first).
set(COLLIE_TORCH_EXT AUTO CACHE STRING "Build collie.torch's C++ fast path: AUTO, ON or OFF")
set(COLLIE_PYTHON /usr/bin/python3 CACHE FILEPATH "The Python whose torch the fast path is built for")

set(_want ${COLLIE_TORCH_EXT})
if(_want STREQUAL "AUTO" AND (COLLIE_SANITIZE OR COLLIE_TSAN OR COLLIE_FUZZ))
  set(_want OFF)
endif()
if(NOT _want STREQUAL "OFF")
  execute_process(
    COMMAND ${COLLIE_PYTHON} -c [=[
import os, sysconfig, torch, torch.utils.cpp_extension as ce
inc = [p for p in ce.include_paths() if os.path.isdir(p)]
if not os.path.exists(os.path.join(inc[0] if inc else "", "torch/csrc/distributed/c10d/ProcessGroup.hpp")):
    inc = [p for p in ("/usr/include", "/usr/include/torch/csrc/api/include") if os.path.isdir(p)]
print(",".join(inc))
print(",".join(ce.library_paths()))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print(torch.__version__)
]=]
    OUTPUT_VARIABLE _torch_out ERROR_VARIABLE _torch_err RESULT_VARIABLE _torch_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE "\n" "|" _torch_lines "${_torch_out}")
  string(REPLACE "|" ";" _torch_list "${_torch_lines}")
  list(LENGTH _torch_list _n)
  set(_ok FALSE)
  if(_torch_rc EQUAL 0 AND _n EQUAL 6)
    list(GET _torch_list 0 _inc)
    list(GET _torch_list 1 _libdir)
    list(GET _torch_list 2 _abi)
    list(GET _torch_list 3 _pyinc)
    list(GET _torch_list 4 _suffix)
    list(GET _torch_list 5 _torch_version)
    string(REPLACE "," ";" _inc "${_inc}")
    string(REPLACE "," ";" _libdir "${_libdir}")
    find_file(_c10d_hpp torch/csrc/distributed/c10d/ProcessGroup.hpp PATHS ${_inc} /usr/include NO_DEFAULT_PATH
              NO_CACHE)
    if(_c10d_hpp AND EXISTS ${_pyinc}/Python.h)
      set(_ok TRUE)
    endif()
    if(_ok AND _want STREQUAL "AUTO" AND NOT _torch_version MATCHES "^1\\.")
      message(STATUS "collie.torch C++ fast path: not built for torch ${_torch_version} by default "
                     "(its 2.x form is unverified; -DCOLLIE_TORCH_EXT=ON builds it)")
      return()
    endif()
  endif()
  if(NOT _ok)
    if(_want STREQUAL "ON")
      message(FATAL_ERROR "COLLIE_TORCH_EXT=ON: ${COLLIE_PYTHON} has no torch with C++ headers "
                          "(Debian: apt-get install libtorch-dev python3-dev) ${_torch_err}")
    endif()
    message(STATUS "collie.torch C++ fast path: not built (no torch C++ headers for ${COLLIE_PYTHON})")
  else()
    enable_language(CXX)
    set(_name _collie_torch_fast)
    add_library(collie_torch_ext MODULE
      ${PROJECT_SOURCE_DIR}/python/collie/torch/_ext/fast_group.cpp
      ${PROJECT_SOURCE_DIR}/python/collie/torch/_ext/fast_work.cpp)
    set_target_properties(collie_torch_ext PROPERTIES
      OUTPUT_NAME ${_name} PREFIX "" SUFFIX "${_suffix}"
      CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_VISIBILITY_PRESET hidden)
    target_compile_definitions(collie_torch_ext PRIVATE COLLIE_TORCH_EXT_NAME=${_name}
                               _GLIBCXX_USE_CXX11_ABI=${_abi})
    target_include_directories(collie_torch_ext SYSTEM PRIVATE ${_inc} ${_pyinc})
    target_include_directories(collie_torch_ext PRIVATE ${PROJECT_SOURCE_DIR}/include)
    target_compile_options(collie_torch_ext PRIVATE -O2 -Wall -Wno-unused-parameter)
    target_link_directories(collie_torch_ext PRIVATE ${_libdir})
    find_library(_torch_python torch_python PATHS ${_libdir} /usr/lib/x86_64-linux-gnu NO_CACHE)
    target_link_libraries(collie_torch_ext PRIVATE collie c10 torch torch_cpu ${_torch_python})
    set_target_properties(collie_torch_ext PROPERTIES BUILD_RPATH "${_libdir};${CMAKE_BINARY_DIR}")
    message(STATUS "collie.torch C++ fast path: built for torch ${_torch_version}")
  endif()
endif()
