# Runs tests/distributed/mpi_failures MODE under mpirun -np 2 and checks that the job ends (no
# hang: 60 s at most), fails, and says why. killed_in_checkpoint then checks the checkpoint left
# behind is one whole save (mpi_failures verify), sleeps and stopped the checkpoint written before
# the late step (verify_late). Variables: MPIRUN, PROGRAM, MODE, WORK_DIR.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(mpirun ${MPIRUN} --allow-run-as-root --oversubscribe --mca btl self,vader)
# timeout(1) ends mpirun (TERM, then KILL), which ends its processes, a stopped one too: a hung job
# never outlives the test. 60 s: the sleeping rank of `sleeps` would wake only after 120.
string(TIMESTAMP began "%s")
execute_process(COMMAND timeout -k 10 60 ${mpirun} -np 2 ${PROGRAM} ${MODE} ${WORK_DIR}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 80)
string(TIMESTAMP ended "%s")
math(EXPR took "${ended} - ${began}")
set(all "${out}${err}")
message(STATUS "mpirun ended with '${rc}' after ${took} s:\n${all}")
if(rc MATCHES "timeout" OR took GREATER_EQUAL 60)
  message(FATAL_ERROR "${MODE}: the job hung (killed after 60 s)")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "${MODE}: the job ended with status 0, a failure was expected")
endif()

if(MODE STREQUAL "ends_early")
  set(expected "rank 0: error: loom::distributed: rank 1 of 2 ended its program while rank 0 was still training")
elseif(MODE STREQUAL "sleeps" OR MODE STREQUAL "stopped")
  # The rank that waited names the one it waited for, the agreement and the step, and the last
  # agreement the late one came to.
  set(expected "rank 0: error: loom::distributed: rank 0 of 2 waited 2 s (the timeout) at step 2's losses for rank 1 (its last agreement: the end of a checkpoint's write), which did not come to it; every process stops")
elseif(MODE STREQUAL "throws_in_backward")
  set(expected "rank 1 of 2 stops every process: this process ended while its gradients were being summed")
else()
  set(expected "rank 1 kills rank 0")
endif()
string(FIND "${all}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${MODE}: expected the output to say '${expected}'")
endif()

if(MODE STREQUAL "sleeps" OR MODE STREQUAL "stopped")
  if(all MATCHES "trained step 2")
    message(FATAL_ERROR "${MODE}: a process trained step 2 without rank 1")
  endif()
  execute_process(COMMAND timeout -k 10 60 ${mpirun} -np 1 ${PROGRAM} verify_late ${WORK_DIR}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 80)
  message(STATUS "verify_late: ${out}${err}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "verified")
    message(FATAL_ERROR "the checkpoint written before the late step does not load")
  endif()
endif()

if(MODE STREQUAL "killed_in_checkpoint")
  file(GLOB left ${WORK_DIR}/*.loom-tmp.*)
  if(NOT left)
    message(FATAL_ERROR "no unfinished temporary file: rank 0 was not killed during a write")
  endif()
  execute_process(COMMAND ${mpirun} -np 1 ${PROGRAM} verify ${WORK_DIR}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  message(STATUS "verify: ${out}${err}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "verified")
    message(FATAL_ERROR "the checkpoint left by the killed writer does not load whole")
  endif()
endif()
