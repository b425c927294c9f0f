# Run with cmake -P after loom_tests is built (a bad name fails the build): doctest_discover_tests (doctest 2.4.9) splits test
# names at ';' and mis-parses an unbalanced '[' or ']', after which CTest cannot read ANY test
# ("add_test called with incorrect number of arguments"). Name the culprits so they get renamed.
execute_process(COMMAND ${TEST_EXECUTABLE} --list-test-cases OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  return()  # doctest_discover_tests reports a binary that cannot list its tests
endif()
string(REPLACE ";" "<semicolon>" out "${out}")
string(REPLACE "[" "<open>" out "${out}")
string(REPLACE "]" "<close>" out "${out}")
string(REPLACE "\n" ";" lines "${out}")
set(bad "")
foreach(line IN LISTS lines)
  if(line MATCHES "^<open>doctest<close>" OR line MATCHES "^=+$")
    continue()
  endif()
  string(REGEX MATCHALL "<open>" opens "${line}")
  string(REGEX MATCHALL "<close>" closes "${line}")
  list(LENGTH opens n_open)
  list(LENGTH closes n_close)
  if(line MATCHES "<semicolon>" OR NOT n_open EQUAL n_close)
    string(REPLACE "<semicolon>" ";" line "${line}")
    string(REPLACE "<open>" "[" line "${line}")
    string(REPLACE "<close>" "]" line "${line}")
    string(APPEND bad "\n  ${line}")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "These TEST_CASE names break CTest registration (a ';' or an unbalanced '[' / ']'); "
                  "ctest will refuse to run until they are renamed (use ',' or '--' instead of ';', "
                  "and balanced brackets or '(' ')'):${bad}")
endif()
