# End-to-end check of the language-model sample (run by CTest, tests/CMakeLists.txt), on a small text
# written here: a tiny GPT and a tiny LSTM each train a few iterations with --save and report the
# held-out loss; --model M --eval reports the same loss again; --generate with a seed draws the same
# text twice, and another seed another text, and stdout holds that text alone (the timing and the
# scores go to stderr); --top-k 1 is the same whatever the seed; bad input fails before any work
# with a message naming the file, line and column or the option, and nothing on stdout: a
# character outside the alphabet in --eval and in --prompt, --model with --train, a model file cut
# in half, a --width the heads do not divide, a FIFO, a device or a file whose read fails, a text
# with nothing to predict, weights that overflow float, numbers out of range (each message true of
# the number it quotes), sizes that cannot fit in memory; a prompt longer than the context is
# cropped, and the default prompt is no error where the text has no newline. The text that ships
# for the demonstration trains with dropout (on attention weights too), and the demonstration keeps
# the sizes and settings given. --eval-every keeps the parameters that scored best on the held-out
# part. --holdout-spans holds out the end of each of that many equal parts.
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
    if(NOT rc EQUAL 0 OR NOT out MATCHES "^to " OR NOT err MATCHES "generated: 40 characters in")
      message(FATAL_ERROR "${arch}: --generate failed, or no timing on stderr (${rc}): ${out} ${err}")
    endif()
    set(drawn "${out}")  # stdout is the prompt and the drawn text, nothing else
    string(LENGTH "${drawn}" length)
    if(NOT length EQUAL 43)
      message(FATAL_ERROR "${arch}: expected the prompt and 40 characters, got ${length}: '${drawn}'")
    endif()
    list(APPEND drawn_${arch} "${drawn}")
  endforeach()
  # The GPT's key/value cache in bfloat16: the same length of text, the choice said on stderr.
  execute_process(COMMAND ${SAMPLE} --model ${dir}/${arch}.loom --generate 40 --prompt "to " --seed 1 --cache bfloat16
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(LENGTH "${out}" length)
  if(arch STREQUAL "transformer")
    set(said "float weights, bfloat16 cache\\)")
  else()
    set(said "float weights\\)")
  endif()
  if(NOT rc EQUAL 0 OR NOT length EQUAL 43 OR NOT err MATCHES "${said}")
    message(FATAL_ERROR "${arch}: --cache bfloat16: expected 43 characters and '${said}' on stderr (${rc}): '${out}' '${err}'")
  endif()
  list(GET drawn_${arch} 0 first)
  list(GET drawn_${arch} 1 again)
  list(GET drawn_${arch} 2 other)
  if(NOT first STREQUAL again OR first STREQUAL other)
    message(FATAL_ERROR "${arch}: seed 1 twice and seed 2 must give the same and another text: '${first}' '${again}' '${other}'")
  endif()
  set(greedy "")
  foreach(seed 1 2)
    execute_process(COMMAND ${SAMPLE} --model ${dir}/${arch}.loom --generate 30 --prompt "to " --seed ${seed}
      --top-k 1 OUTPUT_VARIABLE out ERROR_VARIABLE err)
    list(APPEND greedy "${out}")
  endforeach()
  list(GET greedy 0 g1)
  list(GET greedy 1 g2)
  if(NOT g1 STREQUAL g2)
    message(FATAL_ERROR "${arch}: --top-k 1 depends on the seed: '${g1}' '${g2}'")
  endif()
  # --eval with --generate: the score goes to stderr, stdout stays the text alone.
  execute_process(COMMAND ${SAMPLE} --model ${dir}/${arch}.loom --eval ${dir}/held.txt --generate 40 --prompt "to "
    --seed 1 --temperature 1.5 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(GET drawn_${arch} 0 first)
  if(NOT rc EQUAL 0 OR NOT out STREQUAL first OR NOT err MATCHES "held.txt: ${held} nats per character")
    message(FATAL_ERROR "${arch}: --eval with --generate: expected '${first}' alone on stdout and the score on stderr (${rc}): '${out}' '${err}'")
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
expect_failure("a cache precision that is none" "--cache: int8 not in"
  --model ${dir}/transformer.loom --generate 5 --cache int8)
expect_failure("a model file cut in half" "cut.loom" --model ${dir}/cut.loom --generate 5)

# Files that are no text: a FIFO without a writer (which would block the open forever), a device
# (/dev/zero would be read forever, /dev/null read as empty), a file whose read fails (EIO).
execute_process(COMMAND mkfifo ${dir}/fifo.txt RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mkfifo failed")
endif()
function(expect_quick_failure what pattern)
  execute_process(COMMAND ${SAMPLE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
  if(rc EQUAL 0 OR rc MATCHES "timeout" OR NOT err MATCHES "${pattern}" OR NOT out STREQUAL "")
    message(FATAL_ERROR "${what}: expected a failure matching '${pattern}' and nothing on stdout, got ${rc}: '${out}' '${err}'")
  endif()
endfunction()
expect_quick_failure("--train of a FIFO" "fifo.txt' is a FIFO \\(named pipe\\), not a regular file" --train ${dir}/fifo.txt)
expect_quick_failure("--eval of a FIFO" "fifo.txt' is a FIFO \\(named pipe\\), not a regular file"
  --model ${dir}/lstm.loom --eval ${dir}/fifo.txt)
expect_quick_failure("--eval of a FIFO before training" "fifo.txt' is a FIFO"
  --train ${dir}/text.txt --eval ${dir}/fifo.txt --iterations 1)
expect_failure("--train /dev/zero" "'/dev/zero' is a character device, not a regular file" --train /dev/zero)
expect_failure("--eval /dev/null" "'/dev/null' is a character device, not a regular file"
  --model ${dir}/lstm.loom --eval /dev/null)
expect_failure("--train of a file whose read fails" "'/proc/self/mem' could not be read" --train /proc/self/mem)

# Texts with nothing to predict: an empty one, one of one character, a held-out part of one character.
file(WRITE ${dir}/empty.txt "")
file(WRITE ${dir}/one.txt "t")
expect_failure("--eval of an empty text" "--eval [^ ]*empty.txt holds 0 characters: nothing to predict"
  --model ${dir}/transformer.loom --eval ${dir}/empty.txt)
expect_failure("--eval of one character" "--eval [^ ]*one.txt holds 1 character: nothing to predict"
  --model ${dir}/lstm.loom --eval ${dir}/one.txt)
expect_failure("--eval of one character before training" "one.txt holds 1 character: nothing to predict"
  --train ${dir}/text.txt --eval ${dir}/one.txt)
file(WRITE ${dir}/short.txt "to be, or not to be: that")  # 25 characters: 5 % of them is 1
expect_failure("a held-out part of one character" "the held-out part of --train [^ ]*short.txt holds 1 character"
  --train ${dir}/short.txt --block 4 --batch 2 --layers 1 --heads 2 --width 8 --holdout-spans 1)
# Halves of 12 and 13 characters, a tenth of each held out: two spans of one character each.
expect_failure("held-out spans of one character each"
  "the held-out part of --train [^ ]*short.txt holds 2 characters in 2 spans: nothing to predict"
  --train ${dir}/short.txt --block 4 --batch 2 --layers 1 --heads 2 --width 8 --holdout 0.1 --holdout-spans 2)

# Finite weights so large that float arithmetic overflows: the score and the generation name the file.
foreach(arch transformer lstm)
  execute_process(COMMAND ${WRITE_MODEL} ${dir}/huge_${arch}.loom ${arch} 3e38 RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "write_lm_model failed (${rc})")
  endif()
  file(WRITE ${dir}/abc.txt "abc\nabca\n")
  expect_failure("${arch}: a score of weights 3e38" "--model [^ ]*huge_${arch}.loom scores -?nan nats per character on [^ ]*abc.txt: its weights overflow float arithmetic \\(the largest is 3e\\+38\\)"
    --model ${dir}/huge_${arch}.loom --eval ${dir}/abc.txt)
  expect_failure("${arch}: generating from weights 3e38" "--model [^ ]*huge_${arch}.loom: generating from it failed: "
    --model ${dir}/huge_${arch}.loom --generate 5 --prompt a)
endforeach()

# Numbers out of range, each message true of the number it quotes.
foreach(seed 18446744073709551616 100000000000000000000000000000 -1 1.5)
  expect_failure("--seed ${seed}" "--seed: ${seed} is not a whole number from 0 to 18446744073709551615"
    --model ${dir}/lstm.loom --generate 5 --seed ${seed})
endforeach()
execute_process(COMMAND ${SAMPLE} --model ${dir}/lstm.loom --generate 5 --prompt "to " --seed 18446744073709551615
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^to ")
  message(FATAL_ERROR "--seed 2^64 - 1 is a seed (${rc}): ${out} ${err}")
endif()
expect_failure("--learning-rate 0" "--learning-rate: 0 is not a number from 1e-09 to 10"
  --train ${dir}/text.txt --learning-rate 0)
expect_failure("--block past its range" "--block: 1048577 is not a whole number from 2 to 1048576"
  --train ${dir}/text.txt --block 1048577)

# Sizes whose training cannot fit in memory: refused before anything is built, naming the sizes and bytes.
expect_failure("--width 16384 --layers 64" "--layers 64, --width 16384, --block 16, --batch 4 \\(transformer\\): training needs at least [0-9.]+ TB .*more than this machine's"
  --train ${dir}/text.txt --width 16384 --layers 64 --heads 4 --block 16 --batch 4)
expect_failure("--block 1048576" "--block 1048576.*training needs at least [0-9.]+ TB"
  --train ${dir}/text.txt --block 1048576 --layers 1 --heads 2 --width 8)

# The default prompt (a newline) where the text has none: no error about an option never given;
# generation starts from the text's first character, and says so on stderr.
string(REPLACE "\n" " " flat "${text}")
file(WRITE ${dir}/flat.txt "${flat}")
execute_process(COMMAND ${SAMPLE} --train ${dir}/flat.txt --layers 1 --heads 2 --width 8 --block 16 --batch 4
  --iterations 2 --generate 10 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT err MATCHES "starting from 't' instead" OR NOT out MATCHES "eval held-out: [0-9.]+ nats per character[^\n]*\nt")
  message(FATAL_ERROR "the default prompt over a text without a newline (${rc}): '${out}' '${err}'")
endif()
execute_process(COMMAND ${SAMPLE} --train ${dir}/flat.txt --layers 1 --heads 2 --width 8 --block 16 --batch 4
  --iterations 2 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR err MATCHES "prompt")
  message(FATAL_ERROR "training without --generate over a text without a newline (${rc}): '${out}' '${err}'")
endif()
expect_failure("a --prompt given outside the alphabet" "--prompt:1:1: the character U\\+000A"
  --train ${dir}/flat.txt --layers 1 --heads 2 --width 8 --block 16 --batch 4 --iterations 2 --generate 10
  --prompt "\n")

# The demonstration fills in only what the command line did not give.
execute_process(COMMAND ${SAMPLE} --layers 1 --heads 2 --width 8 --block 16 --batch 2 --iterations 2
  --log-every 1 --generate 7 --prompt "Th" --temperature 0 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "model: transformer, 1 layers of 8, 2 heads, context 16"
   OR NOT out MATCHES "iteration 2 " OR NOT out MATCHES "\nTh" OR NOT err MATCHES "generated: 7 characters")
  message(FATAL_ERROR "the demonstration replaced the sizes or settings given (${rc}): '${out}' '${err}'")
endif()
