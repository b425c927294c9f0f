# End-to-end check of the sample's model file and --score output (run by CTest, tests/CMakeLists.txt):
# train a tiny model on the built-in data, save it, score three raw-text pairs (a header line, one
# pair without a label), and require exactly one "final<TAB>network" line per pair on stdout with
# the network's cosine in [-1, 1]; then a truncated model file and a non-model file must each fail
# with a message naming the file and a non-zero exit, and --save into a missing directory must fail
# before any training.
set(dir ${WORK_DIR})
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
set(tiny --questions 40 --epochs 1 --embed 8 --hidden 6 --dense 5)

execute_process(COMMAND ${SAMPLE} ${tiny} --save ${dir}/m.loom RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${dir}/m.loom)
  message(FATAL_ERROR "training with --save failed (${rc}): ${out} ${err}")
endif()

file(WRITE ${dir}/pairs.tsv "question\tsentence\tlabel\nWho wrote Hamlet?\tHamlet was written by Shakespeare.\t1\n"
  "Who wrote Hamlet?\tParis is in France.\t0\nWhere is Paris?\tIt's in France.\n")
execute_process(COMMAND ${SAMPLE} --model ${dir}/m.loom --score ${dir}/pairs.tsv
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "--score failed (${rc}): ${err}")
endif()
string(REGEX REPLACE "\n$" "" out "${out}")
string(REPLACE "\n" ";" lines "${out}")
list(LENGTH lines n)
if(NOT n EQUAL 3)
  message(FATAL_ERROR "expected 3 lines on stdout, got ${n}: '${out}'")
endif()
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^(-?[0-9]+\\.[0-9]+)\t(-?[0-9]+\\.[0-9]+)$")
    message(FATAL_ERROR "not final<TAB>network: '${line}'")
  endif()
  if(CMAKE_MATCH_2 GREATER 1.000001 OR CMAKE_MATCH_2 LESS -1.000001)
    message(FATAL_ERROR "network score (a cosine) out of [-1, 1]: '${line}'")
  endif()
endforeach()
if(NOT err MATCHES "scored 3 pairs")
  message(FATAL_ERROR "expected the summary on stderr, got '${err}'")
endif()

function(expect_failure what pattern)
  execute_process(COMMAND ${SAMPLE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}" OR NOT out STREQUAL "")
    message(FATAL_ERROR "${what}: expected a failure matching '${pattern}' and nothing on stdout, got ${rc}: '${out}' '${err}'")
  endif()
endfunction()
file(SIZE ${dir}/m.loom size)
math(EXPR keep "${size} / 2")
execute_process(COMMAND head -c ${keep} ${dir}/m.loom OUTPUT_FILE ${dir}/cut.loom)
expect_failure("truncated model" "cut.loom" --model ${dir}/cut.loom --score ${dir}/pairs.tsv)
expect_failure("not a model" "error: .*pairs.tsv" --model ${dir}/pairs.tsv --score ${dir}/pairs.tsv)
expect_failure("--save into a missing directory" "--save .*cannot write" ${tiny} --save ${dir}/no/such/dir/m.loom)
expect_failure("--score without --model" "go together" --score ${dir}/pairs.tsv)
file(REMOVE_RECURSE ${dir})
