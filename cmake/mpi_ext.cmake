# collie.MPI's C fast path (python/collie/MPI/_ext/mpi_fast.c, docs/mpi.md,
# "Speed"): a CPython extension that hands the blocking point-to-point calls
# and collectives of plain buffers straight to libcollie. Built
# for COLLIE_PYTHON (cmake/torch_ext.cmake sets it: the interpreter running
# pip in a pip build) when its headers are installed (Debian: python3-dev),
# into the build directory, where collie.MPI finds it next to libcollie.so;
# never in a sanitizer build (the interpreter would have to load the
# sanitizer runtime first). Without it collie.MPI runs every call in Python.
# COLLIE_MPI_EXT_WHY: why it is not built, when it is not.
set(COLLIE_MPI_EXT AUTO CACHE STRING "Build collie.MPI's C fast path: AUTO, ON or OFF")
set(COLLIE_MPI_EXT_WHY "")
if(COLLIE_MPI_EXT STREQUAL "OFF")
  set(COLLIE_MPI_EXT_WHY "COLLIE_MPI_EXT=OFF")
elseif(COLLIE_SANITIZE OR COLLIE_TSAN OR COLLIE_FUZZ)
  set(COLLIE_MPI_EXT_WHY "not built in a sanitizer build")
else()
  execute_process(COMMAND ${COLLIE_PYTHON} -c
    "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))"
    OUTPUT_VARIABLE _mpi_out RESULT_VARIABLE _mpi_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE "\n" ";" _mpi_out "${_mpi_out}")
  list(LENGTH _mpi_out _mpi_n)
  if(NOT _mpi_rc EQUAL 0 OR NOT _mpi_n EQUAL 2)
    set(COLLIE_MPI_EXT_WHY "${COLLIE_PYTHON} did not run")
  else()
    list(GET _mpi_out 0 _mpi_inc)
    list(GET _mpi_out 1 _mpi_suffix)
    if(NOT EXISTS ${_mpi_inc}/Python.h)
      set(COLLIE_MPI_EXT_WHY "no Python.h for ${COLLIE_PYTHON} (Debian: python3-dev)")
    endif()
  endif()
endif()
if(COLLIE_MPI_EXT_WHY STREQUAL "")
  add_library(collie_mpi_ext MODULE ${PROJECT_SOURCE_DIR}/python/collie/MPI/_ext/mpi_fast.c)
  set_target_properties(collie_mpi_ext PROPERTIES
    OUTPUT_NAME _collie_mpi_fast PREFIX "" SUFFIX "${_mpi_suffix}" C_VISIBILITY_PRESET hidden
    BUILD_RPATH "${CMAKE_BINARY_DIR}")
  target_include_directories(collie_mpi_ext SYSTEM PRIVATE ${_mpi_inc})
  target_include_directories(collie_mpi_ext PRIVATE ${PROJECT_SOURCE_DIR}/include)
  # CPython's headers are not -Wpedantic-clean; the module's own code keeps
  # the project's warnings otherwise.
  target_compile_options(collie_mpi_ext PRIVATE -O2 -Wno-pedantic)
  target_link_libraries(collie_mpi_ext PRIVATE collie)
  message(STATUS "collie.MPI C fast path: built for ${COLLIE_PYTHON}")
else()
  if(COLLIE_MPI_EXT STREQUAL "ON")
    message(FATAL_ERROR "COLLIE_MPI_EXT=ON, but: ${COLLIE_MPI_EXT_WHY}")
  endif()
  message(STATUS "collie.MPI C fast path: not built (${COLLIE_MPI_EXT_WHY})")
endif()
