# The version the documentation states against the one the build says: cmake -DSOURCE_DIR=<repo>
# -P check_version.cmake. Fails, naming file and line, when README.md's "(this is X.Y.Z)", the first
# released section of CHANGELOG.md (`## [X.Y.Z] - date`), a `find_package(loom X.Y ...)` in
# README.md or tests/install/CMakeLists.txt, or CHANGELOG.md's sentence of which version
# `find_package(loom X.Y)` accepts is not the project's VERSION in CMakeLists.txt.
# MUTATE_FILE / MUTATE_FROM / MUTATE_TO: see doc_text.cmake.
cmake_minimum_required(VERSION 3.20)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<repo> -P check_version.cmake")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/doc_text.cmake)
set(errors 0)
macro(fail text)
  message(NOTICE "docs.version: ${text}")
  math(EXPR errors "${errors} + 1")
endmacro()

doc_read(CMakeLists.txt cmake_text)
if(NOT cmake_text MATCHES "project\\(loom VERSION ([0-9]+)\\.([0-9]+)\\.([0-9]+)")
  message(FATAL_ERROR "docs.version: CMakeLists.txt has no project(loom VERSION X.Y.Z)")
endif()
set(version "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}")
set(minor "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")

# Every statement of the version in `file`: `pattern` with one group, the version it states.
function(check_statements file pattern want what)
  doc_lines(${file} lines)
  set(n 0)
  set(found 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    string(REGEX MATCHALL "${pattern}" hits "${line}")
    foreach(hit IN LISTS hits)
      string(REGEX REPLACE "${pattern}" "\\1" stated "${hit}")
      math(EXPR found "${found} + 1")
      if(NOT stated STREQUAL want)
        fail("${file}:${n}: ${what} ${stated}, but CMakeLists.txt's project VERSION makes it ${want}")
      endif()
    endforeach()
  endforeach()
  if(found EQUAL 0)
    fail("${file}: no statement of ${what} (${pattern})")
  endif()
  set(errors ${errors} PARENT_SCOPE)
endfunction()

check_statements(README.md "\\(this is ([0-9]+\\.[0-9]+\\.[0-9]+)\\)" ${version} "says this is")
check_statements(README.md "find_package\\(loom ([0-9]+\\.[0-9]+)" ${minor} "asks find_package for")
check_statements(tests/install/CMakeLists.txt "find_package\\(loom ([0-9]+\\.[0-9]+)" ${minor} "asks find_package for")
check_statements(CHANGELOG.md "`find_package\\(loom ([0-9]+\\.[0-9]+)\\)` accepts" ${minor} "says find_package accepts")

# The first released section of the CHANGELOG is this version.
doc_lines(CHANGELOG.md changelog)
set(n 0)
foreach(line IN LISTS changelog)
  math(EXPR n "${n} + 1")
  if(line MATCHES "^## <lb>([0-9]+\\.[0-9]+\\.[0-9]+)<rb>")
    if(NOT CMAKE_MATCH_1 STREQUAL version)
      fail("CHANGELOG.md:${n}: its latest version is ${CMAKE_MATCH_1}, but CMakeLists.txt's project VERSION is ${version}")
    endif()
    break()
  endif()
endforeach()

if(errors GREATER 0)
  message(FATAL_ERROR "docs.version: ${errors} statement(s) of the version disagree with CMakeLists.txt")
endif()
message(STATUS "docs.version: README.md, CHANGELOG.md and tests/install state version ${version}")
