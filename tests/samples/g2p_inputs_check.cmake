# The g2p sample's training run with a user's own files (run by CTest, tests/CMakeLists.txt): what
# goes wrong is refused before any training (nothing on stdout, nothing written), and what is
# accepted trains as documented. Checked: a word outside the letters in --eval, named with file:line
# and the whole character; a 100,000-letter word, named with its file:line and the limit; an
# upper-case (CMUdict 0.7b style) dictionary, read as lower case with a note; fewer than 50 words,
# with one held out, too few to choose an epoch: the last is kept (a 49-word dictionary trained 4
# epochs saves another model than 1 epoch) and the rate is never halved, with a note (the choice
# itself: tests/samples/g2p/test_epoch_choice.cpp); a pronunciation of a million phonemes, named
# with its file:line and the limit; a single training word, with nothing held out said so;
# --minutes too short for one epoch, which is trained to its end; NaN and infinite floating options
# and costs past their bounds (--words, --beam, --max-length, --batch) refused by name; an odd
# --model-dim and --heads that do not divide it, refused by name; --save onto /proc/version or a
# 256-byte name; --plot without --eval words; --plot where the user already has an alignment_1.svg.
set(dir ${WORK_DIR})
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
set(tiny --epochs 1 --embed 8 --encoder 6 --decoder 8)

function(expect_failure what pattern)
  execute_process(COMMAND ${SAMPLE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}" OR NOT out STREQUAL "")
    message(FATAL_ERROR "${what}: expected a failure matching '${pattern}' and nothing on stdout, got ${rc}: '${out}' '${err}'")
  endif()
endfunction()
# Runs the sample, which must succeed; its stdout and stderr in OUT and ERR.
function(run what)
  execute_process(COMMAND ${SAMPLE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): '${out}' '${err}'")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

file(WRITE ${dir}/d.dict "cat K AE1 T\ndog D AO1 G\nmoon M UW1 N\n")
file(WRITE ${dir}/accent.dict "tea T IY1\ncafé K AE0 F EY1\n")
expect_failure("--eval word outside the letters" "accent.dict:2: the word 'café' holds 'é'"
  ${tiny} --train ${dir}/d.dict --eval ${dir}/accent.dict --save ${dir}/m1.loom)
string(REPEAT "a" 100000 long_word)
file(WRITE ${dir}/long.dict "cat K AE1 T\n${long_word} AH0\n")
expect_failure("a 100,000-letter word" "long.dict:2: the word 'aaaa.*100000 letters; a word may have at most 64"
  ${tiny} --train ${dir}/long.dict)
if(EXISTS ${dir}/m1.loom)
  message(FATAL_ERROR "a refused run saved a model")
endif()
string(REPEAT " AH0" 1000000 long_pronunciation)
file(WRITE ${dir}/long_pronunciation.dict "cat K AE1 T\npaste${long_pronunciation}\n")
expect_failure("a pronunciation of 1,000,000 phonemes"
  "long_pronunciation.dict:2: the pronunciation of 'paste' has 1000000 phonemes; a pronunciation may have at most 256"
  ${tiny} --train ${dir}/long_pronunciation.dict)

# CMUdict 0.7b writes its words in upper case.
file(WRITE ${dir}/upper.dict "ABBEY AE1 B IY0\nCAT K AE1 T\nDOG D AO1 G\nMOON M UW1 N\n")
run("an upper-case dictionary" ${tiny} --train ${dir}/upper.dict --eval ${dir}/upper.dict)
if(NOT ERR MATCHES "upper.dict: 4 word\\(s\\) with upper case read as lower case" OR NOT OUT MATCHES "WER")
  message(FATAL_ERROR "an upper-case dictionary: no note or no score: '${OUT}' '${ERR}'")
endif()

# Fewer than 50 words: one held out, scored, but too few to tell epochs apart: every epoch is kept
# in turn (the last one is saved) and the rate is never halved, with a note saying so.
run("3 training words" --epochs 3 --embed 8 --encoder 6 --decoder 8 --learning-rate 1e-9 --max-length 100
  --train ${dir}/d.dict)
if(NOT OUT MATCHES "of 2 words \\([^)]*\\), 1 words held out")
  message(FATAL_ERROR "3 training words: not one held out: '${OUT}'")
endif()
if(NOT OUT MATCHES "note: 1 held-out word, too few to tell epochs apart \\(20 or more do\\): the last epoch is kept"
   OR NOT OUT MATCHES "epoch 1 [^\n]*PER [0-9.]+ %\nepoch 2 [^\n]*PER [0-9.]+ %\nepoch 3 [^\n]*PER [0-9.]+ %\n")
  message(FATAL_ERROR "3 epochs, 1 held-out word: expected the note, no choice and no halving: '${OUT}'")
endif()
if(NOT OUT MATCHES "learning rate 1e-09 after 0 warm-up steps, schedule plateau\n")
  message(FATAL_ERROR "the LSTM's schedule: expected plateau, no warm-up: '${OUT}'")
endif()
# 49 words (one held out): the model saved after 4 epochs is the last epoch's, not epoch 1's.
set(dict49 "")
foreach(onset "b;B" "d;D" "f;F" "g;G" "k;K" "l;L" "m;M")
  list(GET onset 0 letter)
  list(GET onset 1 consonant)
  foreach(vowel "a;AE" "e;EH" "i;IH" "o;AA" "u;AH" "ee;IY" "oo;UW")
    list(GET vowel 0 spelling)
    list(GET vowel 1 sound)
    string(APPEND dict49 "${letter}${spelling}t ${consonant} ${sound}1 T\n")
  endforeach()
endforeach()
file(WRITE ${dir}/49.dict "${dict49}")
run("49 words, 1 epoch" ${tiny} --train ${dir}/49.dict --save ${dir}/e1.loom)
run("49 words, 4 epochs" --epochs 4 --embed 8 --encoder 6 --decoder 8 --train ${dir}/49.dict --save ${dir}/e4.loom)
if(NOT OUT MATCHES "1 words held out" OR NOT OUT MATCHES "note: 1 held-out word, too few" OR OUT MATCHES "rate halved")
  message(FATAL_ERROR "49 words: expected one held out, the note and no halving: '${OUT}'")
endif()
file(SHA256 ${dir}/e1.loom e1)
file(SHA256 ${dir}/e4.loom e4)
if(e1 STREQUAL e4)
  message(FATAL_ERROR "49 words: 4 epochs saved the same model as 1 epoch (epoch 1 kept)")
endif()
# The Transformer's rate falls to 0 over the budget: flat epochs never halve it.
run("a Transformer's budget schedule" --architecture transformer --epochs 3 --layers 1 --model-dim 8 --heads 2
  --feedforward 8 --learning-rate 1e-9 --warmup 2 --train ${dir}/d.dict)
if(NOT OUT MATCHES "learning rate 1e-09 after 2 warm-up steps, schedule budget\n" OR OUT MATCHES "rate halved"
   OR NOT OUT MATCHES "epoch 3 [^\n]*PER [0-9.]+ %\n")
  message(FATAL_ERROR "a Transformer's budget schedule: expected budget and no halving: '${OUT}'")
endif()
# Its parameters are averaged over the last part of the budget, every 10 steps (392 training words: 7
# steps an epoch, 28 in 4 epochs, the last half from step 14: step 20 only); its 8 held-out words are
# too few to choose between that mean and an epoch, so the mean, the schedule's end, is kept;
# --average 0 averages nothing.
set(tiny_transformer --architecture transformer --words 400 --epochs 4 --layers 1 --model-dim 8 --heads 2
  --feedforward 8 --warmup 2)
run("a Transformer's average" ${tiny_transformer} --average 0.5)
if(NOT OUT MATCHES "\nmean of 1 point of the last 50 % of the budget: held-out greedy WER [0-9.]+ % PER [0-9.]+ %, kept \\(the schedule's end\\)\n")
  message(FATAL_ERROR "--average 0.5: expected the mean of 1 point (step 20), kept: '${OUT}'")
endif()
run("no average" ${tiny_transformer} --average 0)
if(OUT MATCHES "mean of")
  message(FATAL_ERROR "--average 0: expected no mean: '${OUT}'")
endif()
expect_failure("--average nan" "--average: nan is not a finite number" --average nan)
expect_failure("--average 2" "--average: .*2 not in range" --average 2)
# An untrained model's first score (often far above 200 %: 30-phoneme garbage, though how far depends on
# the compiler's rounding of its random start) is still not a reason to halve.
run("epoch 1 of an untrained model" --words 60 ${tiny})
if(NOT OUT MATCHES "\nepoch 1 [^\n]*PER [0-9.]+ %\n" OR OUT MATCHES "rate halved")
  message(FATAL_ERROR "epoch 1 of an untrained model: expected no halving: '${OUT}'")
endif()
file(WRITE ${dir}/one.dict "cat K AE1 T\n")
run("1 training word" --epochs 2 --embed 8 --encoder 6 --decoder 8 --train ${dir}/one.dict)
if(NOT OUT MATCHES "nothing held out" OR OUT MATCHES "rate halved|held-out greedy")
  message(FATAL_ERROR "1 training word: expected 'nothing held out' and no held-out score: '${OUT}'")
endif()

# --minutes too short for one epoch: that epoch is trained to its end, with a note.
run("--minutes 1e-9" --words 60 ${tiny} --minutes 1e-9)
if(NOT OUT MATCHES "ran out within the first epoch" OR NOT OUT MATCHES "\nepoch 1 ")
  message(FATAL_ERROR "--minutes 1e-9: expected epoch 1 and a note: '${OUT}'")
endif()

expect_failure("--minutes nan" "--minutes: nan is not a finite number" --minutes nan)
expect_failure("--minutes inf" "--minutes: inf is not a finite number" --minutes inf)
expect_failure("--learning-rate nan" "--learning-rate: nan is not a finite number" --learning-rate nan)
expect_failure("--learning-rate 1e999" "--learning-rate: 1e999 is not a finite number" --learning-rate 1e999)
expect_failure("--dropout nan" "--dropout: nan is not a finite number" --architecture transformer --dropout nan)
expect_failure("--label-smoothing nan" "--label-smoothing: nan is not a finite number"
  --architecture transformer --label-smoothing nan)
expect_failure("--schedule cosine" "--schedule: cosine not in" --schedule cosine)
expect_failure("--words 10000000" "--words: .*10000000 not in range 10 to 200000" --words 10000000)
expect_failure("--beam 1000" "--beam: .*1000 not in range 1 to 32" --beam 1000)
expect_failure("--max-length 1000" "--max-length: .*1000 not in range 1 to 128" --max-length 1000)
expect_failure("--batch 100000" "--batch: .*100000 not in range 1 to 1024" --batch 100000)
# The Transformer's width is refused as the option, before any work: sinusoidal positions take
# pairs of dimensions, and heads share the width equally. --help states both rules.
expect_failure("--model-dim 3" "^error: --model-dim 3: the Transformer's sinusoidal positions take pairs of dimensions"
  --architecture transformer --model-dim 3 --heads 1)
expect_failure("--heads 4 of --model-dim 6" "^error: --heads 4 does not divide --model-dim 6"
  --architecture transformer --model-dim 6 --heads 4)
execute_process(COMMAND ${SAMPLE} --help OUTPUT_VARIABLE help)
if(NOT help MATCHES "--model-dim[^\n]*\n[^\n]*width, even" OR NOT help MATCHES "--heads[^\n]*\n[^\n]*divide --model-dim")
  message(FATAL_ERROR "--help does not state the rules of --model-dim and --heads: '${help}'")
endif()

# Outputs the file system refuses, before training.
expect_failure("--save /proc/version" "--save /proc/version: cannot write there: cannot create a file in '/proc'"
  --words 60 ${tiny} --save /proc/version)
string(REPEAT "m" 256 long_name)
expect_failure("--save with a 256-byte name" "--save .*: cannot write there: .* is 256 bytes long"
  --words 60 ${tiny} --save ${dir}/${long_name})

# --plot draws --eval words: without them it is refused, and nothing is created.
expect_failure("--plot without --eval" "--plot .*/P0: the alignments are drawn for words of --eval"
  ${tiny} --train ${dir}/d.dict --plot ${dir}/P0)
if(EXISTS ${dir}/P0)
  message(FATAL_ERROR "--plot without --eval created its directory")
endif()
# A user's own alignment_1.svg is never replaced: the program chose that name, the user did not.
file(MAKE_DIRECTORY ${dir}/P1)
file(WRITE ${dir}/P1/alignment_1.svg "mine")
expect_failure("--plot over an existing alignment_1.svg" "--plot .*P1/alignment_1.svg: exists, and --plot names"
  --words 60 ${tiny} --plot ${dir}/P1)
file(READ ${dir}/P1/alignment_1.svg mine)
if(NOT mine STREQUAL "mine")
  message(FATAL_ERROR "--plot replaced the user's alignment_1.svg")
endif()
file(REMOVE_RECURSE ${dir})
