# The C++ half of the torch backend (python/collie/torch/_ext, docs/torch.md,
# "The C++ fast path"): built against the torch that COLLIE_PYTHON imports,
# into the build directory, where collie.torch finds it next to libcollie.so.
# AUTO builds it when that torch has its C++ headers (Debian: libtorch-dev;
# pip wheels ship them) and is a version the fast path was tested on (below;
# ON builds it for any other 2.1 or later), and never in a sanitizer build
# (the interpreter would have to load the sanitizer runtime first).
#
# In a pip build (SKBUILD: pip install . / pip wheel ., cmake/wheel.cmake)
# COLLIE_PYTHON defaults to the interpreter running pip, and the module goes
# into the wheel. pip's build isolation (the default) hides that
# environment's packages behind PYTHONPATH: when torch does not import so,
# the environment is asked again without it, so that a plain pip install .
# builds the fast path for the torch installed where collie is installed.
# COLLIE_TORCH_EXT_WHY: why it is not built, when it is not (the wheel says it).
set(COLLIE_TORCH_EXT AUTO CACHE STRING "Build collie.torch's C++ fast path: AUTO, ON or OFF")
if(SKBUILD AND Python_EXECUTABLE)
  set(_python ${Python_EXECUTABLE})
else()
  set(_python /usr/bin/python3)
endif()
set(COLLIE_PYTHON ${_python} CACHE FILEPATH "The Python whose torch the fast path is built for")
set(COLLIE_TORCH_EXT_WHY "")

# out = 1 when the first of torch's include directories (_inc, then
# /usr/include) holding header has a line matching regex, else 0.
function(_collie_torch_header_has header regex out)
  set(_has 0)
  foreach(_d ${_inc} /usr/include)
    if(EXISTS ${_d}/${header})
      file(STRINGS ${_d}/${header} _lines REGEX "${regex}")
      if(_lines)
        set(_has 1)
      endif()
      break()
    endif()
  endforeach()
  set(${out} ${_has} PARENT_SCOPE)
endfunction()

set(_want ${COLLIE_TORCH_EXT})
if(_want STREQUAL "AUTO" AND (COLLIE_SANITIZE OR COLLIE_TSAN OR COLLIE_FUZZ))
  set(_want OFF)
  set(COLLIE_TORCH_EXT_WHY "not built in a sanitizer build")
elseif(_want STREQUAL "OFF")
  set(COLLIE_TORCH_EXT_WHY "COLLIE_TORCH_EXT=OFF")
endif()
if(NOT _want STREQUAL "OFF")
  set(_probe [=[
import os, sys, sysconfig, torch, torch.utils.cpp_extension as ce
inc = [p for p in ce.include_paths() if os.path.isdir(p)]
if not os.path.exists(os.path.join(inc[0] if inc else "", "torch/csrc/distributed/c10d/ProcessGroup.hpp")):
    inc = [p for p in ("/usr/include", "/usr/include/torch/csrc/api/include") if os.path.isdir(p)]
print(",".join(inc))
print(",".join(ce.library_paths()))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print(torch.__version__)
print("%d.%d" % sys.version_info[:2])
]=])
  execute_process(COMMAND ${COLLIE_PYTHON} -c "${_probe}"
    OUTPUT_VARIABLE _torch_out ERROR_VARIABLE _torch_err RESULT_VARIABLE _torch_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _torch_rc EQUAL 0 AND SKBUILD AND DEFINED ENV{PYTHONPATH})
    execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH ${COLLIE_PYTHON} -c "${_probe}"
      OUTPUT_VARIABLE _out2 ERROR_VARIABLE _err2 RESULT_VARIABLE _rc2 OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_rc2 EQUAL 0)
      set(_torch_out "${_out2}")
      set(_torch_rc 0)
      message(STATUS "collie.torch C++ fast path: torch from ${COLLIE_PYTHON}'s environment "
                     "(outside pip's build isolation)")
    endif()
  endif()
  string(REPLACE "\n" "|" _torch_lines "${_torch_out}")
  string(REPLACE "|" ";" _torch_list "${_torch_lines}")
  list(LENGTH _torch_list _n)
  set(_ok FALSE)
  set(_why "")
  if(_torch_rc EQUAL 0 AND _n EQUAL 7)
    list(GET _torch_list 0 _inc)
    list(GET _torch_list 1 _libdir)
    list(GET _torch_list 2 _abi)
    list(GET _torch_list 3 _pyinc)
    list(GET _torch_list 4 _suffix)
    list(GET _torch_list 5 _torch_version)
    list(GET _torch_list 6 _py_version)
    string(REPLACE "," ";" _inc "${_inc}")
    string(REPLACE "," ";" _libdir "${_libdir}")
    # torch's c10d headers and pybind11 (pip wheels ship it in torch's
    # include directory; Debian's libtorch-dev does not pull pybind11-dev).
    set(_have_c10d FALSE)
    set(_have_pybind FALSE)
    foreach(_d ${_inc} /usr/include)
      if(EXISTS ${_d}/torch/csrc/distributed/c10d/ProcessGroup.hpp)
        set(_have_c10d TRUE)
      endif()
      if(EXISTS ${_d}/pybind11/pybind11.h)
        set(_have_pybind TRUE)
      endif()
    endforeach()
    if(NOT _have_c10d)
      set(_why "no torch C++ headers (Debian: libtorch-dev)")
    elseif(NOT _have_pybind)
      set(_why "no pybind11 headers (Debian: pybind11-dev)")
    elseif(NOT EXISTS ${_pyinc}/Python.h)
      set(_why "no Python.h (Debian: python3-dev)")
    elseif(_py_version VERSION_LESS 3.11)
      set(_why "Python ${_py_version}: the fast path reads frames with the C API of 3.11 and later")
    else()
      set(_ok TRUE)
    endif()
    # AUTO builds it for the torch versions it has been tested across (the
    # whole of tests/torch through it: 1.13 here; 2.6 and 2.14 in Debian 13
    # and sid roots, scripts/torch2_check.sh); ON tries any other 2.1 or later.
    if(_ok AND _want STREQUAL "AUTO" AND
       NOT _torch_version MATCHES "^(1\\.13|2\\.([6-9]|1[0-4]))\\.")
      string(CONCAT COLLIE_TORCH_EXT_WHY "not built for torch ${_torch_version} by default "
                    "(tested on 1.13 and 2.6 to 2.14; -DCOLLIE_TORCH_EXT=ON builds it)")
      message(STATUS "collie.torch C++ fast path: ${COLLIE_TORCH_EXT_WHY}")
      return()
    endif()
  endif()
  if(NOT _ok)
    if(_why STREQUAL "")
      # (the traceback's last line: ModuleNotFoundError: No module named 'torch')
      string(STRIP "${_torch_err}" _torch_err)
      string(REGEX REPLACE ".*\n" "" _torch_err "${_torch_err}")
      set(_why "${COLLIE_PYTHON} does not import torch: ${_torch_err}")
    endif()
    if(_want STREQUAL "ON")
      message(FATAL_ERROR "COLLIE_TORCH_EXT=ON, but the fast path cannot be built for ${COLLIE_PYTHON}: ${_why}")
    endif()
    set(COLLIE_TORCH_EXT_WHY "${_why}")
    message(STATUS "collie.torch C++ fast path: not built (${_why})")
  else()
    enable_language(CXX)
    # The C++ standard torch's headers demand (17 up to torch 2.9 or so,
    # 20 in newer ones: ATen.h says which it needs), and whether its Backend
    # can be shut down and aborted (newer torch: destroy_process_group and
    # _abort_process_group call them, and the FastGroup forwards both).
    _collie_torch_header_has(ATen/ATen.h "C\\+\\+20 or later" _cxx20)
    _collie_torch_header_has(torch/csrc/distributed/c10d/Backend.hpp "virtual void abort\\(\\)" _abort)
    set(_cxx 17)
    if(_cxx20)
      set(_cxx 20)
    endif()
    set(_name _collie_torch_fast)
    add_library(collie_torch_ext MODULE
      ${PROJECT_SOURCE_DIR}/python/collie/torch/_ext/fast_group.cpp
      ${PROJECT_SOURCE_DIR}/python/collie/torch/_ext/fast_work.cpp)
    set_target_properties(collie_torch_ext PROPERTIES
      OUTPUT_NAME ${_name} PREFIX "" SUFFIX "${_suffix}"
      CXX_STANDARD ${_cxx} CXX_STANDARD_REQUIRED ON CXX_VISIBILITY_PRESET hidden)
    target_compile_definitions(collie_torch_ext PRIVATE COLLIE_TORCH_EXT_NAME=${_name}
                               COLLIE_TORCH_BACKEND_ABORT=${_abort}
                               _GLIBCXX_USE_CXX11_ABI=${_abi})
    target_include_directories(collie_torch_ext SYSTEM PRIVATE ${_inc} ${_pyinc})
    target_include_directories(collie_torch_ext PRIVATE ${PROJECT_SOURCE_DIR}/include)
    target_compile_options(collie_torch_ext PRIVATE -O2 -Wall -Wno-unused-parameter)
    target_link_directories(collie_torch_ext PRIVATE ${_libdir})
    target_link_libraries(collie_torch_ext PRIVATE collie c10 torch torch_cpu torch_python)
    set_target_properties(collie_torch_ext PROPERTIES BUILD_RPATH "${_libdir};${CMAKE_BINARY_DIR}")
    # The torch it was built for, beside it: collie.torch reads it before
    # loading the module, which would crash a process running another torch
    # (a build directory shared by two environments).
    file(WRITE ${CMAKE_BINARY_DIR}/${_name}.torch "${_torch_version}\n")
    message(STATUS "collie.torch C++ fast path: built for torch ${_torch_version} (C++${_cxx})")
  endif()
endif()
