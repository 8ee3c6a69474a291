# The wheel of pip install . / pip wheel . (pyproject.toml: scikit-build-core
# runs CMake with SKBUILD set and installs into the wheel; docs/python.md,
# "Setup"). CMakeLists.txt's own install() rules are for cmake --install and
# are left out of a pip build.
#
#   collie/                  the package (python/collie: scikit-build-core copies it)
#   collie/lib/libcollie.so.0
#                            the library, under its soname: collie._lib loads it
#                            before any other when COLLIE_LIBRARY is unset
#   collie/lib/_collie_torch_fast<ext suffix>, _collie_torch_fast.torch
#                            the torch fast path and the torch it was built for
#                            (cmake/torch_ext.cmake), where collie.torch looks:
#                            next to the library in use
#   collie/lib/_collie_torch_fast.missing
#                            instead, when it was not built: why (collie.torch
#                            says it with how to add the fast path)
#   collie/lib/_collie_mpi_fast<ext suffix>
#                            collie.MPI's C fast path (cmake/mpi_ext.cmake), when
#                            the Python running pip has its headers
#   collie/lib/libcollie-nccl.so
#                            NCCL's C API over collie (docs/nccl.md), to
#                            LD_PRELOAD; `python -m collie.nccl` prints its path
#   scripts: collierun, collie-bench, collie-report
#                            the environment's bin/. They link collie statically
#                            (collie-report not at all): no RPATH to get right.

set(_wheel_lib collie/lib)
install(PROGRAMS $<TARGET_FILE:collie> DESTINATION ${_wheel_lib}
        RENAME libcollie.so.${PROJECT_VERSION_MAJOR})
install(PROGRAMS $<TARGET_FILE:collie_nccl> DESTINATION ${_wheel_lib})
install(TARGETS collierun collie-bench collie-report RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR})
if(TARGET collie_torch_ext)
  # It needs libcollie.so.0 (loaded already by collie._lib, found here if
  # not) and torch's libraries (loaded by import torch; the installed
  # torch's directory, site-packages/torch/lib, if not).
  set_target_properties(collie_torch_ext PROPERTIES INSTALL_RPATH "\$ORIGIN;\$ORIGIN/../../torch/lib")
  install(TARGETS collie_torch_ext LIBRARY DESTINATION ${_wheel_lib})
  install(FILES ${CMAKE_BINARY_DIR}/_collie_torch_fast.torch DESTINATION ${_wheel_lib})
else()
  file(WRITE ${CMAKE_BINARY_DIR}/_collie_torch_fast.missing "${COLLIE_TORCH_EXT_WHY}\n")
  install(FILES ${CMAKE_BINARY_DIR}/_collie_torch_fast.missing DESTINATION ${_wheel_lib})
endif()
if(TARGET collie_mpi_ext)
  set_target_properties(collie_mpi_ext PROPERTIES INSTALL_RPATH "\$ORIGIN")
  install(TARGETS collie_mpi_ext LIBRARY DESTINATION ${_wheel_lib})
endif()
