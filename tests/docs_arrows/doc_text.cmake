# What the documentation checks share (included by check_machines.cmake, check_figures.cmake and
# check_labels.cmake). Markdown is read as a list of lines with the characters CMake's lists treat
# specially (`;`, `[`, `]`, `\`) replaced by <sc>, <lb>, <rb>, <bs>, so a line is always one element.
# MUTATE_FILE / MUTATE_FROM / MUTATE_TO replace a piece of one file's text as read (never the file),
# so that a test can show that a check fails on a false statement.

# The lines of SOURCE_DIR/<relative>, into <out>.
function(doc_lines relative out)
  file(READ "${SOURCE_DIR}/${relative}" text)
  if(DEFINED MUTATE_FILE AND MUTATE_FILE STREQUAL relative)
    string(FIND "${text}" "${MUTATE_FROM}" at)
    if(at LESS 0)
      message(FATAL_ERROR "MUTATE_FROM '${MUTATE_FROM}' is not in ${relative}")
    endif()
    string(REPLACE "${MUTATE_FROM}" "${MUTATE_TO}" text "${text}")
  endif()
  string(REPLACE "\\" "<bs>" text "${text}")
  string(REPLACE ";" "<sc>" text "${text}")
  string(REPLACE "[" "<lb>" text "${text}")
  string(REPLACE "]" "<rb>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

# The cells of a Markdown table row `| a | b |`, stripped, into <out> (a;b).
function(doc_cells line out)
  string(REGEX REPLACE "^ *\\|" "" line "${line}")
  string(REGEX REPLACE "\\| *$" "" line "${line}")
  string(REPLACE "|" ";" parts "${line}")
  set(cells "")
  foreach(p IN LISTS parts)
    string(STRIP "${p}" p)
    if(p STREQUAL "")
      set(p "<empty>")
    endif()
    list(APPEND cells "${p}")
  endforeach()
  set(${out} "${cells}" PARENT_SCOPE)
endfunction()

# The Markdown files whose statements the checks read, relative to SOURCE_DIR.
function(doc_files out)
  file(GLOB docs RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/docs/*.md" "${SOURCE_DIR}/*/README.md")
  set(files README.md bench/RESULTS.md ${docs})
  if(EXISTS "${SOURCE_DIR}/CONTRIBUTING.md")
    list(APPEND files CONTRIBUTING.md)
  endif()
  list(REMOVE_DUPLICATES files)
  list(SORT files)
  set(${out} "${files}" PARENT_SCOPE)
endfunction()
