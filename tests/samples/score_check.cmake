# End-to-end check of the sample's model file and --score output (run by CTest, tests/CMakeLists.txt):
# train a tiny model on the built-in data, save it, score three raw-text pairs (a header line, one
# pair without a label), and require exactly one "final<TAB>network" line per pair on stdout with
# the network's cosine in [-1, 1] (and one line per row after a byte-order mark and header, or of rows
# whose question is "Question"); then a truncated model file and a non-model file must each fail
# with a message naming the file and a non-zero exit, and --save into a missing directory must fail
# before any training. Every output is checked before any work (nothing on stdout, nothing written,
# the input unchanged): the training data as --save, --save and --graph on one path, a device as
# --graph, a directory as --save, a directory where --plot writes training.svg, --save into the
# --plot directory; a FIFO or /dev/zero as --model fails at once; counts out of range (--epochs -1)
# and --train with --score are refused, and so is --plot with --train but no --eval (nothing to draw);
# --plot works with fewer than 10 questions (nothing held out).
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

# A byte-order mark before a header line: the header is no pair (6 rows, 6 scores); rows whose question
# is the word "Question" are pairs (8 rows, 8 scores).
string(ASCII 239 187 191 bom)
set(six "Who wrote Hamlet?\tShakespeare wrote it.\t1\nWho wrote Hamlet?\tIt is a play.\t0\n"
  "Where is Paris?\tIn France.\t1\nWhere is Paris?\tOn the Seine.\t0\nWhat is 2+2?\tFour.\t1\nWhat is 2+2?\tFive.\t0\n")
file(WRITE ${dir}/bom.tsv "${bom}question\tsentence\n" ${six})
file(WRITE ${dir}/questions.tsv "Question\tIt is a word.\t1\nQuestion\tA query.\t0\n" ${six})
foreach(case "bom.tsv;6" "questions.tsv;8")
  list(GET case 0 name)
  list(GET case 1 want)
  execute_process(COMMAND ${SAMPLE} --model ${dir}/m.loom --score ${dir}/${name} RESULT_VARIABLE rc OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  string(REGEX MATCHALL "\n" ends "${out}")
  list(LENGTH ends n)
  if(NOT rc EQUAL 0 OR NOT n EQUAL want)
    message(FATAL_ERROR "--score ${name}: expected ${want} scores, got ${n} (${rc}): '${out}' '${err}'")
  endif()
endforeach()

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

# Outputs: refused by option and path before training, and nothing the user owns changes.
file(WRITE ${dir}/d.tsv "")
foreach(q RANGE 11)
  file(APPEND ${dir}/d.tsv "what is thing${q} ?\tthing${q} is a word of note .\t1\nwhat is thing${q} ?\tthe sky is blue .\t0\n")
endforeach()
file(SHA256 ${dir}/d.tsv data_sum)
set(small --epochs 1 --embed 8 --hidden 6 --dense 5)
expect_failure("--save over the training data" "--save .*d.tsv: is also the input of --train"
  ${small} --train ${dir}/d.tsv --save ${dir}/d.tsv)
file(SHA256 ${dir}/d.tsv sum)
if(NOT sum STREQUAL data_sum)
  message(FATAL_ERROR "--save over the training data changed it")
endif()
expect_failure("--save and --graph on one path" "--graph .*/P: is also the output of --save"
  ${tiny} --save ${dir}/P --graph ${dir}/P)
expect_failure("a device as --graph" "--graph /dev/null: is a character device" ${tiny} --graph /dev/null)
file(MAKE_DIRECTORY ${dir}/D ${dir}/PD/training.svg)
expect_failure("a directory as --save" "--save .*/D: is a directory" ${tiny} --save ${dir}/D)
expect_failure("--plot where training.svg is a directory" "--plot .*PD/training.svg: is a directory"
  ${tiny} --plot ${dir}/PD)
expect_failure("--save into the --plot directory" "--save .*/X: is the directory --plot writes"
  ${tiny} --save ${dir}/X --plot ${dir}/X)
if(EXISTS ${dir}/P OR EXISTS ${dir}/X OR NOT IS_DIRECTORY ${dir}/D)
  message(FATAL_ERROR "a refused run wrote a file")
endif()
execute_process(COMMAND stat -c %F /dev/null OUTPUT_VARIABLE kind)
if(NOT kind MATCHES "character special")
  message(FATAL_ERROR "/dev/null was replaced: ${kind}")
endif()
execute_process(COMMAND mkfifo ${dir}/fifo RESULT_VARIABLE rc)
if(rc EQUAL 0)  # opening a FIFO would block until a writer came: a hang, cut by the timeout
  execute_process(COMMAND ${SAMPLE} --model ${dir}/fifo --score ${dir}/pairs.tsv TIMEOUT 30
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "fifo' is a FIFO \\(named pipe\\), not a regular file")
    message(FATAL_ERROR "a FIFO as --model: expected a refusal, got ${rc}: '${err}'")
  endif()
endif()
expect_failure("/dev/zero as --model" "'/dev/zero' is a character device, not a regular file" --model /dev/zero --score ${dir}/pairs.tsv)
# --plot draws the --eval pairs: with --train and no --eval it is refused, before training.
expect_failure("--plot without --eval" "--plot .*/P0: the plots are drawn for the pairs of --eval"
  ${small} --train ${dir}/d.tsv --plot ${dir}/P0)
if(EXISTS ${dir}/P0)
  message(FATAL_ERROR "--plot without --eval created its directory")
endif()
expect_failure("--epochs -1" "--epochs" ${tiny} --epochs -1)
expect_failure("--embed 0" "--embed" ${tiny} --embed 0)
expect_failure("--score with --train" "scores only" --model ${dir}/m.loom --score ${dir}/pairs.tsv --train ${dir}/d.tsv)
execute_process(COMMAND ${SAMPLE} --questions 9 ${small} --plot ${dir}/few RESULT_VARIABLE rc OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${dir}/few/training.svg)
  message(FATAL_ERROR "--plot with 9 questions (none held out) failed (${rc}): ${err}")
endif()
file(REMOVE_RECURSE ${dir})
