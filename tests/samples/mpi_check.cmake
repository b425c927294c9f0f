# The sample under mpirun (run by CTest with label mpi, tests/CMakeLists.txt): two processes train a
# tiny model on the built-in data with --save and --graph; rank 0 alone prints (each of its lines
# once), rank 0 alone writes the model file, and the file scores pairs like a one-process model's.
set(dir ${WORK_DIR})
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
set(tiny --questions 40 --epochs 1 --embed 8 --hidden 6 --dense 5)

execute_process(COMMAND ${MPIRUN} --allow-run-as-root --oversubscribe --mca btl self,vader -np 2
  ${SAMPLE} ${tiny} --save ${dir}/m.loom --graph ${dir}/g.dot
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${dir}/m.loom OR NOT EXISTS ${dir}/g.dot)
  message(FATAL_ERROR "mpirun -np 2 training with --save failed (${rc}): ${out} ${err}")
endif()
foreach(line "^data: " "\nmodel: " "\nsaved " "\n  word overlap")
  string(REGEX MATCHALL "${line}" found "${out}")
  list(LENGTH found n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "'${line}' printed ${n} times, expected once (rank 0 alone prints): ${out}")
  endif()
endforeach()
file(GLOB leftovers ${dir}/*.tmp* ${dir}/*.check)
if(leftovers)
  message(FATAL_ERROR "files left behind by the processes: ${leftovers}")
endif()

file(WRITE ${dir}/pairs.tsv "Who wrote Hamlet?\tHamlet was written by Shakespeare.\t1\nWhere is Paris?\tIt's in France.\t1\n")
execute_process(COMMAND ${SAMPLE} --model ${dir}/m.loom --score ${dir}/pairs.tsv
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "[^\n]+\t[^\n]+\n" lines "${out}")
list(LENGTH lines n)
if(NOT rc EQUAL 0 OR NOT n EQUAL 2)
  message(FATAL_ERROR "scoring with the model trained under mpirun failed (${rc}, ${n} lines): ${out} ${err}")
endif()

# --mpi-timeout: a process stopped in the middle of training (SIGSTOP, 5 s after it starts: the
# shell it starts as stops itself once it has become the sample) ends the job within the timeout
# with an error naming it, and the job fails. timeout(1) bounds the test: mpirun, ended, ends the
# stopped process too.
execute_process(COMMAND ${SAMPLE} --help OUTPUT_VARIABLE help)
if(NOT help MATCHES "--mpi-timeout[^\n]*\n[^\n]*seconds a process waits")
  message(FATAL_ERROR "--help does not describe --mpi-timeout: ${help}")
endif()
execute_process(COMMAND timeout -k 10 120 ${MPIRUN} --allow-run-as-root --oversubscribe --mca btl self,vader -np 2
  sh -c "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (sleep 5; kill -STOP $$) & fi; exec \"$0\" \"$@\""
  ${SAMPLE} --questions 2000 --epochs 1000 --embed 8 --hidden 6 --dense 5 --mpi-timeout 3
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 140)
if(rc EQUAL 0 OR rc EQUAL 124 OR rc EQUAL 137 OR rc MATCHES "timeout"
   OR NOT err MATCHES "error: loom::distributed: rank 0 of 2 waited 3 s \\(the timeout\\) at step [0-9]+'s [^\n]* for rank 1")
  message(FATAL_ERROR "a stopped process under mpirun: expected rank 0 to name rank 1 within the timeout (${rc}): ${out} ${err}")
endif()
