# Run with cmake -P: installs the current loom build into a scratch prefix, then configures, builds
# and runs tests/install/ (an outside project using find_package(loom)) against that prefix only.
# Inputs: LOOM_BUILD_DIR, LOOM_SOURCE_DIR, WORK_DIR, CXX_COMPILER, BUILD_TYPE, SANITIZE.
foreach(var LOOM_BUILD_DIR LOOM_SOURCE_DIR WORK_DIR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "test_install.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "install test: ${what}: ok")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run("cmake --install" ${CMAKE_COMMAND} --install ${LOOM_BUILD_DIR} --prefix ${prefix})
foreach(f include/loom/loom.hpp include/loom/graph/ops.hpp include/loom/core/value.hpp include/loom/data/output_files.hpp
    include/loom/text/vocabulary.hpp include/loom/qa/qa_data.hpp include/loom/plot/svg_plot.hpp)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install test: ${f} was not installed")
  endif()
endforeach()

# A sanitized libloom.a needs the sanitizer runtime at link time; the package does not export our
# private flags, so the outside project is told here, as its own user would do.
set(extra)
if(SANITIZE STREQUAL "thread")
  list(APPEND extra "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread")
elseif(SANITIZE)
  list(APPEND extra "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
endif()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()
# CMAKE_PREFIX_PATH points at the scratch prefix only: the app must not see loom's build tree.
run("configure tests/install" ${CMAKE_COMMAND} -S ${LOOM_SOURCE_DIR}/tests/install -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON ${extra})
run("build tests/install" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("run install_check" ${WORK_DIR}/build/install_check)
