# End-to-end check of the language-model sample (run by CTest, tests/CMakeLists.txt), on a small text
# written here: a tiny GPT and a tiny LSTM each train a few iterations with --save and report the
# held-out loss; --model M --eval reports the same loss again; --generate with a seed draws the same
# text twice, and another seed another text; --top-k 1 is the same whatever the seed; bad input fails
# before any work with a message naming the file, line and column or the option, and nothing on
# stdout: a character outside the alphabet in --eval and in --prompt, --model with --train, a model
# file cut in half, a --width the heads do not divide; a prompt longer than the context is cropped. The text that
# ships for the demonstration trains with dropout (on attention weights too). --eval-every keeps the
# parameters that scored best on the held-out part. --holdout-spans holds out the end of each of
# that many equal parts.
set(dir ${WORK_DIR})
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
set(line "to be, or not to be: that is the question.\nwhether 'tis nobler in the mind to suffer\n")
set(text "")
foreach(i RANGE 30)
  string(APPEND text "${line}")
endforeach()
file(WRITE ${dir}/text.txt "${text}")
file(WRITE ${dir}/other.txt "to be\nor Not\n")

# write_held_out(TEXT FILE): the part of TEXT the sample holds out with --holdout-spans 1 (its last 5 %) into FILE.
function(write_held_out text file)
  string(LENGTH "${text}" n)
  math(EXPR held_chars "${n} * 5 / 100")
  math(EXPR from "${n} - ${held_chars}")
  string(SUBSTRING "${text}" ${from} ${held_chars} held_text)
  file(WRITE ${file} "${held_text}")
endfunction()

execute_process(COMMAND ${SAMPLE} --train ${SONNETS} --layers 1 --heads 2 --width 8 --block 16 --batch 4
  --iterations 3 --dropout 0.3 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "eval held-out: [0-9.]+ nats per character")
  message(FATAL_ERROR "the shipped sonnets with --dropout 0.3 did not train (${rc}): ${out} ${err}")
endif()

foreach(arch transformer lstm)
  set(tiny --train ${dir}/text.txt --architecture ${arch} --layers 1 --heads 2 --width 8 --block 16 --batch 4
    --iterations 20 --log-every 10 --holdout-spans 1)
  execute_process(COMMAND ${SAMPLE} ${tiny} --save ${dir}/${arch}.loom
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT EXISTS ${dir}/${arch}.loom)
    message(FATAL_ERROR "${arch}: training with --save failed (${rc}): ${out} ${err}")
  endif()
  if(NOT out MATCHES "eval held-out: ([0-9.]+) nats per character")
    message(FATAL_ERROR "${arch}: no held-out loss in: ${out}")
  endif()
  set(held ${CMAKE_MATCH_1})
  if(NOT out MATCHES "trained: 20 iterations, 1280 tokens")
    message(FATAL_ERROR "${arch}: no 'trained:' line of 20 iterations of 4 x 16 tokens in: ${out}")
  endif()
  # The held-out end again, written to a file of its own: the same windows, the same loss.
  write_held_out("${text}" ${dir}/held.txt)
  execute_process(COMMAND ${SAMPLE} --model ${dir}/${arch}.loom --eval ${dir}/held.txt
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "held.txt: ${held} nats per character")
    message(FATAL_ERROR "${arch}: --model --eval of the held-out end did not give ${held} (${rc}): ${out} ${err}")
  endif()
  foreach(seed 1 1 2)
    execute_process(COMMAND ${SAMPLE} --model ${dir}/${arch}.loom --generate 40 --prompt "to " --seed ${seed}
      --temperature 1.5 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0 OR NOT out MATCHES "^to ")
      message(FATAL_ERROR "${arch}: --generate failed (${rc}): ${out} ${err}")
    endif()
    string(REGEX REPLACE "\ngenerated: .*" "" drawn "${out}")
    string(LENGTH "${drawn}" length)
    if(NOT length EQUAL 43)
      message(FATAL_ERROR "${arch}: expected the prompt and 40 characters, got ${length}: '${drawn}'")
    endif()
    list(APPEND drawn_${arch} "${drawn}")
  endforeach()
  list(GET drawn_${arch} 0 first)
  list(GET drawn_${arch} 1 again)
  list(GET drawn_${arch} 2 other)
  if(NOT first STREQUAL again OR first STREQUAL other)
    message(FATAL_ERROR "${arch}: seed 1 twice and seed 2 must give the same and another text: '${first}' '${again}' '${other}'")
  endif()
  set(greedy "")
  foreach(seed 1 2)
    execute_process(COMMAND ${SAMPLE} --model ${dir}/${arch}.loom --generate 30 --prompt "to " --seed ${seed}
      --top-k 1 OUTPUT_VARIABLE out)
    string(REGEX REPLACE "\ngenerated: .*" "" drawn "${out}")
    list(APPEND greedy "${drawn}")
  endforeach()
  list(GET greedy 0 g1)
  list(GET greedy 1 g2)
  if(NOT g1 STREQUAL g2)
    message(FATAL_ERROR "${arch}: --top-k 1 depends on the seed: '${g1}' '${g2}'")
  endif()
endforeach()

# --eval-every keeps the parameters that scored best on the held-out part: a text whose held-out end
# is unlike the rest (capitals the training part never has) scores worse the longer the model
# memorizes the rest, so the best is the first score; the final score and the saved model are it.
set(unlike "${text}")
foreach(i RANGE 5)
  string(APPEND unlike "QUICK ZEPHYRS BLOW, VEXING DAFT JIM.\n")
endforeach()
file(WRITE ${dir}/unlike.txt "${unlike}")
execute_process(COMMAND ${SAMPLE} --train ${dir}/unlike.txt --layers 1 --heads 2 --width 8 --block 16 --batch 4
  --iterations 60 --eval-every 10 --learning-rate 0.03 --holdout-spans 1 --save ${dir}/best.loom
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "iteration [0-9]+: held-out [0-9.]+" scores "${out}")
list(LENGTH scores count)
if(NOT rc EQUAL 0 OR NOT count EQUAL 6)
  message(FATAL_ERROR "--eval-every 10 over 60 iterations: expected 6 held-out scores (${rc}): ${out} ${err}")
endif()
list(GET scores 0 first)
list(GET scores 5 last)
string(REGEX REPLACE ".*held-out " "" first "${first}")
string(REGEX REPLACE ".*held-out " "" last "${last}")
if(NOT last GREATER first OR NOT out MATCHES "eval held-out: ${first} nats")
  message(FATAL_ERROR "--eval-every: the final score should be the best (the first, ${first}; the last ${last}): ${out}")
endif()
write_held_out("${unlike}" ${dir}/unlike_held.txt)
execute_process(COMMAND ${SAMPLE} --model ${dir}/best.loom --eval ${dir}/unlike_held.txt OUTPUT_VARIABLE out)
if(NOT out MATCHES "unlike_held.txt: ${first} nats")
  message(FATAL_ERROR "--eval-every: the saved model is not the best one (${first}): ${out}")
endif()

# --holdout-spans 2 --holdout 0.1 of a text made of the same half twice holds out the last tenth of
# each half: the same characters twice, so the held-out score is that of one of them alone. A half
# that ends unlike the rest and is not a multiple of 10 long (the tenth is a whole count either way).
set(half "${text}the end of a half.\n")
string(LENGTH "${half}" m)
while(NOT m MATCHES "5$")
  string(APPEND half "x")
  string(LENGTH "${half}" m)
endwhile()
file(WRITE ${dir}/halves.txt "${half}${half}")
execute_process(COMMAND ${SAMPLE} --train ${dir}/halves.txt --layers 1 --heads 2 --width 8 --block 16 --batch 4
  --iterations 10 --holdout 0.1 --holdout-spans 2 --eval-every 0 --save ${dir}/halves.loom
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
math(EXPR held_chars "${m} / 10")
math(EXPR both "2 * ${held_chars}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "; ${both} held out in 2 spans" OR NOT out MATCHES "eval held-out: ([0-9.]+) nats")
  message(FATAL_ERROR "--holdout-spans 2: expected ${both} characters held out in 2 spans and a score (${rc}): ${out} ${err}")
endif()
set(held ${CMAKE_MATCH_1})
math(EXPR from "${m} - ${held_chars}")
string(SUBSTRING "${half}" ${from} ${held_chars} span)
file(WRITE ${dir}/span.txt "${span}")
execute_process(COMMAND ${SAMPLE} --model ${dir}/halves.loom --eval ${dir}/span.txt OUTPUT_VARIABLE out)
if(NOT out MATCHES "span.txt: ${held} nats")
  message(FATAL_ERROR "--holdout-spans 2: one span alone should score the held-out ${held}: ${out}")
endif()

function(expect_failure what pattern)
  execute_process(COMMAND ${SAMPLE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}" OR NOT out STREQUAL "")
    message(FATAL_ERROR "${what}: expected a failure matching '${pattern}' and nothing on stdout, got ${rc}: '${out}' '${err}'")
  endif()
endfunction()
expect_failure("a character outside the alphabet in --eval"
  "other.txt:2:4: the character 'N' \\(U\\+004E\\) is not in the model's alphabet"
  --model ${dir}/transformer.loom --eval ${dir}/other.txt)
expect_failure("a character outside the alphabet in --prompt" "--prompt:1:1: the character 'Z'"
  --model ${dir}/lstm.loom --generate 5 --prompt "Zo")
expect_failure("--model with --train" "--model FILE evaluates and generates only"
  --model ${dir}/lstm.loom --train ${dir}/text.txt)
# A prompt longer than the context (16) is cropped to its last 16 characters, as nanoGPT's sampling.
execute_process(COMMAND ${SAMPLE} --model ${dir}/transformer.loom --generate 5 --prompt "to be, or not to be: "
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^to be, or not to be: ...")
  message(FATAL_ERROR "a prompt longer than the context: ${rc}: ${out} ${err}")
endif()
expect_failure("heads that do not divide the width" "--width 10 must be a multiple of --heads 4"
  --train ${dir}/text.txt --width 10 --heads 4)
execute_process(COMMAND ${CMAKE_COMMAND} -E copy ${dir}/lstm.loom ${dir}/cut.loom)
file(SIZE ${dir}/lstm.loom size)
math(EXPR cut "${size} / 2")
execute_process(COMMAND truncate -s ${cut} ${dir}/cut.loom)
expect_failure("a model file cut in half" "cut.loom" --model ${dir}/cut.loom --generate 5)
