# End-to-end check of the g2p sample (run by CTest, tests/CMakeLists.txt): train a tiny model on the
# built-in synthetic words with --save and --plot, then --model M --predict must print exactly one
# "word<TAB>PH1 PH2 ..." line per word on stdout (ARPAbet without stress digits), alignments must be
# SVG files, and bad input must fail with a message and nothing on stdout: a word outside the
# letters (named whole), a model file cut in half, --predict without --model, --model with --train, --save into a
# missing directory (before any training), a beam width of 0. Outputs are checked before any work,
# with nothing written and the input unchanged: the training dictionary as --save, a device as
# --save, --save into the --plot directory, a directory where --plot writes alignment_1.svg.
set(dir ${WORK_DIR})
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
set(tiny --words 60 --epochs 1 --embed 8 --encoder 6 --decoder 8)

execute_process(COMMAND ${SAMPLE} ${tiny} --save ${dir}/m.loom --plot ${dir}/plots
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${dir}/m.loom)
  message(FATAL_ERROR "training with --save failed (${rc}): ${out} ${err}")
endif()
if(NOT out MATCHES "WER [0-9.]+ %, PER [0-9.]+ %")
  message(FATAL_ERROR "no WER/PER line in: ${out}")
endif()
file(GLOB svgs ${dir}/plots/alignment_*.svg)
list(LENGTH svgs n_svg)
if(n_svg LESS 1)
  message(FATAL_ERROR "no alignment picture in ${dir}/plots")
endif()
foreach(svg IN LISTS svgs)
  file(READ ${svg} text)
  if(NOT text MATCHES "^<svg" OR NOT text MATCHES "</svg>")
    message(FATAL_ERROR "${svg} is not an SVG document")
  endif()
endforeach()

execute_process(COMMAND ${SAMPLE} --model ${dir}/m.loom --predict cat o'neil x-ray
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "--predict failed (${rc}): ${err}")
endif()
string(REGEX REPLACE "\n$" "" out "${out}")
string(REPLACE "\n" ";" lines "${out}")
list(LENGTH lines n)
if(NOT n EQUAL 3)
  message(FATAL_ERROR "expected 3 lines on stdout, got ${n}: '${out}'")
endif()
set(words "cat;o'neil;x-ray")
foreach(i RANGE 2)
  list(GET lines ${i} line)
  list(GET words ${i} word)
  if(NOT line MATCHES "^${word}\t([A-Z]+( [A-Z]+)*)?$")
    message(FATAL_ERROR "not '${word}<TAB>PH1 PH2 ...': '${line}'")
  endif()
endforeach()

function(expect_failure what pattern)
  execute_process(COMMAND ${SAMPLE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}" OR NOT out STREQUAL "")
    message(FATAL_ERROR "${what}: expected a failure matching '${pattern}' and nothing on stdout, got ${rc}: '${out}' '${err}'")
  endif()
endfunction()
expect_failure("a word outside the letters" "--predict word 2: the word 'café' holds 'é'"
  --model ${dir}/m.loom --predict cat café)
file(SIZE ${dir}/m.loom size)
math(EXPR keep "${size} / 2")
execute_process(COMMAND head -c ${keep} ${dir}/m.loom OUTPUT_FILE ${dir}/cut.loom)
expect_failure("truncated model" "cut.loom" --model ${dir}/cut.loom --predict cat)
expect_failure("--predict without --model" "goes with" --predict cat)
expect_failure("--model alone" "goes with" --model ${dir}/m.loom)
expect_failure("--model with --train" "predicts only" --model ${dir}/m.loom --predict cat --train ${dir}/m.loom)
expect_failure("--save into a missing directory" "--save .*cannot write" ${tiny} --save ${dir}/no/such/dir/m.loom)
expect_failure("beam width 0" "beam" --model ${dir}/m.loom --predict cat --beam 0)

file(WRITE ${dir}/d.dict "cat K AE1 T\ndog D AO1 G\n")
file(SHA256 ${dir}/d.dict data_sum)
expect_failure("--save over the training data" "--save .*d.dict: is also the input of --train"
  ${tiny} --train ${dir}/d.dict --save ${dir}/d.dict)
file(SHA256 ${dir}/d.dict sum)
if(NOT sum STREQUAL data_sum)
  message(FATAL_ERROR "--save over the training data changed it")
endif()
expect_failure("a device as --save" "--save /dev/null: is a character device" ${tiny} --save /dev/null)
expect_failure("--save into the --plot directory" "--save .*/X: is the directory --plot writes"
  ${tiny} --save ${dir}/X --plot ${dir}/X)
file(MAKE_DIRECTORY ${dir}/PD/alignment_1.svg)
expect_failure("--plot where alignment_1.svg is a directory" "--plot .*PD/alignment_1.svg: is a directory"
  ${tiny} --plot ${dir}/PD)
if(EXISTS ${dir}/X)
  message(FATAL_ERROR "a refused run wrote a file")
endif()
expect_failure("--model with --train" "predicts only" --model ${dir}/m.loom --predict cat --train ${dir}/d.dict)
file(REMOVE_RECURSE ${dir})
