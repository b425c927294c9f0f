# qa_study checks every file it writes before any work, as the samples do (data_text::check_outputs):
# --save over the training data, --save on a device or a directory, --dump-scores over the training
# data or a device each fail naming the option and the path, print nothing on stdout, and leave the
# input unchanged. --save over the --resume checkpoint itself is allowed (a resumed run saves on).
set(dir ${WORK_DIR})
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir} ${dir}/D)
file(WRITE ${dir}/d.tsv "")
foreach(q RANGE 11)
  file(APPEND ${dir}/d.tsv "what is thing${q} ?\tthing${q} is a word of note .\t1\nwhat is thing${q} ?\tthe sky is blue .\t0\n")
endforeach()
file(SHA256 ${dir}/d.tsv data_sum)
file(READ ${dir}/d.tsv data)
file(WRITE ${dir}/d.tsv.vocab "${data}")
set(small --epochs 1 --embed 8 --hidden 6 --dense 5)

function(expect_refusal what pattern)
  execute_process(COMMAND ${STUDY} ${ARGN} TIMEOUT 60 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}" OR NOT out STREQUAL "")
    message(FATAL_ERROR "${what}: expected a refusal matching '${pattern}' and nothing on stdout, got ${rc}: '${out}' '${err}'")
  endif()
endfunction()
expect_refusal("--save over the training data" "--save .*d.tsv: is also the input of --train"
  ${small} --train ${dir}/d.tsv --eval ${dir}/d.tsv --save ${dir}/d.tsv)
expect_refusal("--save's vocabulary over the training data" "--save .*d.tsv.vocab: is also the input of --train"
  ${small} --train ${dir}/d.tsv.vocab --save ${dir}/d.tsv)
expect_refusal("--save on a device" "--save /dev/null: is a character device" ${small} --save /dev/null)
expect_refusal("--save on a directory" "--save .*/D: is a directory" ${small} --save ${dir}/D)
expect_refusal("--dump-scores over the training data" "--dump-scores .*d.tsv: is also the input of --train"
  ${small} --folds 2 --train ${dir}/d.tsv --eval ${dir}/d.tsv --dump-scores ${dir}/d.tsv)
expect_refusal("--dump-scores on a device" "--dump-scores /dev/full: is a character device"
  ${small} --folds 2 --train ${dir}/d.tsv --eval ${dir}/d.tsv --dump-scores /dev/full)
foreach(name d.tsv d.tsv.vocab)
  file(SHA256 ${dir}/${name} sum)
  if(NOT sum STREQUAL data_sum)
    message(FATAL_ERROR "a refused run changed ${name}")
  endif()
endforeach()
execute_process(COMMAND stat -c %F /dev/null /dev/full OUTPUT_VARIABLE kinds)
if(NOT kinds MATCHES "^character special[^\n]*\ncharacter special")
  message(FATAL_ERROR "/dev/null or /dev/full was replaced: ${kinds}")
endif()
# A run resumed from a checkpoint saves over it.
foreach(args "--epochs;1;--save;${dir}/c.ckpt" "--resume;${dir}/c.ckpt;--save;${dir}/c.ckpt;--epochs;2")
  execute_process(COMMAND ${STUDY} --questions 20 --embed 8 --hidden 6 --dense 5 ${args} TIMEOUT 120
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT EXISTS ${dir}/c.ckpt OR NOT EXISTS ${dir}/c.ckpt.vocab)
    message(FATAL_ERROR "${args}: expected a saved checkpoint, got ${rc}: '${out}' '${err}'")
  endif()
endforeach()
file(REMOVE_RECURSE ${dir})
