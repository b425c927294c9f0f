# The g2p sample pronouncing a user's word lists (run by CTest, tests/CMakeLists.txt): --predict-file
# reads one word a line (upper case read as lower case, output in the user's spelling), '-' reads
# standard input; a bad word is named by file:line before any output; --predict naming an existing
# file is refused with a pointer to --predict-file; and 50,000 generated words are decoded in
# batches, so the peak memory (RSS, by /usr/bin/time; in a build without a sanitizer) of 50,024
# words is that of 5,408. An untrained tiny model with --beam 1 --max-length 3 keeps this fast.
set(dir ${WORK_DIR})
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
set(fast --beam 1 --max-length 3)

execute_process(COMMAND ${SAMPLE} --words 60 --epochs 1 --embed 8 --encoder 6 --decoder 8 --save ${dir}/m.loom
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "training failed (${rc}): ${err}")
endif()

# Runs the sample (or, when the first argument is sh, the command given) and expects it to fail.
function(expect_failure what pattern)
  set(command ${SAMPLE} ${ARGN})
  if(ARGV2 STREQUAL "sh")
    set(command ${ARGN})
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}" OR NOT out STREQUAL "")
    message(FATAL_ERROR "${what}: expected a failure matching '${pattern}' and nothing on stdout, got ${rc}: '${out}' '${err}'")
  endif()
endfunction()
# The lines of stdout (without the phonemes) of a run that must succeed, in LINES; stdin from INPUT.
function(pronounce what input)
  execute_process(COMMAND ${SAMPLE} --model ${dir}/m.loom ${fast} ${ARGN} INPUT_FILE ${input}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${err}")
  endif()
  string(REGEX REPLACE "\t[A-Z ]*\n" ";" words "${out}")
  set(LINES "${words}" PARENT_SCOPE)
endfunction()

file(WRITE ${dir}/test.words "cat\n\n  O'Neil \nx-ray\r\n")
pronounce("--predict-file" /dev/null --predict dog --predict-file ${dir}/test.words)
if(NOT LINES STREQUAL "dog;cat;O'Neil;x-ray;")
  message(FATAL_ERROR "--predict dog --predict-file: expected dog, cat, O'Neil, x-ray, got '${LINES}'")
endif()
pronounce("--predict-file -" ${dir}/test.words --predict-file -)
if(NOT LINES STREQUAL "cat;O'Neil;x-ray;")
  message(FATAL_ERROR "--predict-file - (standard input): expected cat, O'Neil, x-ray, got '${LINES}'")
endif()

# The file named as a word: refused, pointing at --predict-file.
expect_failure("--predict naming a file" "--predict .*test.words: names a file; .* use --predict-file"
  --model ${dir}/m.loom --predict ${dir}/test.words)
expect_failure("--predict -" "--predict -: .* use --predict-file -" --model ${dir}/m.loom --predict -)
# A bad word on the last line of a list is found before any word is printed.
file(WRITE ${dir}/bad.words "cat\ndog\ncafé\n")
expect_failure("a word outside the letters in a list" "bad.words:3: the word 'café' holds 'é'"
  --model ${dir}/m.loom --predict-file ${dir}/bad.words)
string(REPEAT "b" 100000 long_word)
file(WRITE ${dir}/long.words "cat\n${long_word}\n")
expect_failure("a 100,000-letter word in a list" "long.words:2: the word 'bbbb.*100000 letters; a word may have at most 64"
  --model ${dir}/m.loom --predict-file ${dir}/long.words)
expect_failure("a missing list" "no/such.words" --model ${dir}/m.loom --predict-file ${dir}/no/such.words)

# Standard input closed (<&-) or unreadable (a directory): an error naming it, not an empty list.
expect_failure("--predict-file - with standard input closed"
  "^error: standard input: cannot be read: Bad file descriptor \\(it is closed\\)"
  sh -c "exec \"$0\" --model \"$1\" --predict-file - <&-" ${SAMPLE} ${dir}/m.loom)
expect_failure("--predict-file - reading a directory" "^error: standard input: cannot be read after line 0: Is a directory"
  sh -c "exec \"$0\" --model \"$1\" --predict-file - < \"$2\"" ${SAMPLE} ${dir}/m.loom ${dir})
# A NUL byte in a list of plain words is said to be one, where it is; UTF-16 only when it looks so.
execute_process(COMMAND printf "cat\\000\\ndog\\n" OUTPUT_FILE ${dir}/nul.words)
expect_failure("a NUL byte in a list" "nul.words:1: a NUL byte at column 4; text holds none"
  --model ${dir}/m.loom --predict-file ${dir}/nul.words)
execute_process(COMMAND printf "c\\000a\\000t\\000\\n\\000" OUTPUT_FILE ${dir}/utf16.words)
expect_failure("a UTF-16 list" "utf16.words:1: a NUL byte at column 2; the file looks like UTF-16"
  --model ${dir}/m.loom --predict-file ${dir}/utf16.words)

# 5,408 and 50,024 generated words: every word answered, in order, and memory flat in their number.
set(letters a b c d e f g h i j k l m n o p q r s t u v w x y z)
set(block "")
foreach(a IN LISTS letters)
  foreach(b IN LISTS letters)
    string(APPEND block "${a}${b}x\nq${b}${a}e\n")
  endforeach()
endforeach()  # 1,352 words
string(REPEAT "${block}" 4 block_5k)
string(REPEAT "${block}" 37 block_50k)
file(WRITE ${dir}/5k.words "${block_5k}")
file(WRITE ${dir}/50k.words "${block_50k}")
set(peaks "")
foreach(list 5k 50k)
  set(timed "")
  if(EXISTS /usr/bin/time)
    set(timed /usr/bin/time -f "peak %M KB")
  endif()
  execute_process(COMMAND ${timed} ${SAMPLE} --model ${dir}/m.loom ${fast} --predict-file ${dir}/${list}.words
    RESULT_VARIABLE rc OUTPUT_FILE ${dir}/${list}.out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "--predict-file ${list}.words failed (${rc}): ${err}")
  endif()
  file(STRINGS ${dir}/${list}.out out_lines)
  list(LENGTH out_lines n)
  if(list STREQUAL "50k")
    if(NOT n EQUAL 50024)
      message(FATAL_ERROR "50,024 words given, ${n} lines printed")
    endif()
    list(GET out_lines 50023 last)
    if(NOT last MATCHES "^qzze\t")
      message(FATAL_ERROR "the last line is not the last word's: '${last}'")
    endif()
  endif()
  if(err MATCHES "peak ([0-9]+) KB")
    list(APPEND peaks ${CMAKE_MATCH_1})
  endif()
endforeach()
list(LENGTH peaks n_peaks)
if(SANITIZED)
  # A sanitizer's allocator keeps freed memory in quarantine (256 MB under ASan), so its peak grows
  # with the work done: memory is measured in the build without one.
  message(STATUS "built with a sanitizer (${SANITIZED}): peak memory not compared")
elseif(n_peaks EQUAL 2)
  list(GET peaks 0 peak_5k)
  list(GET peaks 1 peak_50k)
  math(EXPR allowed "${peak_5k} + ${peak_5k} / 4 + 4096")  # 25 % and 4 MB over 5,408 words' peak
  message(STATUS "peak RSS: 5,408 words ${peak_5k} KB, 50,024 words ${peak_50k} KB")
  if(peak_50k GREATER allowed)
    message(FATAL_ERROR "memory grows with the words: peak RSS ${peak_5k} KB for 5,408, ${peak_50k} KB for 50,024")
  endif()
else()
  message(STATUS "no /usr/bin/time: peak memory not measured")
endif()
file(REMOVE_RECURSE ${dir})
