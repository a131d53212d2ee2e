# cmake -DEIN_BUILD_DIR=... -DEIN_SOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -P install_consumer_test.cmake
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGN}\n${output}")
  endif()
endfunction()

run_step(${CMAKE_COMMAND} --install ${EIN_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run_step(${CMAKE_COMMAND} -S ${EIN_SOURCE_DIR}/examples/embed -B ${WORK_DIR}/build -G ${GENERATOR}
         -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run_step(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
foreach(program ein-embed-cpp ein-embed-c ein-embed-c-shared)
  if(NOT EXISTS ${WORK_DIR}/build/${program})
    message(FATAL_ERROR "${program} was not built against the installed package")
  endif()
endforeach()
# The usage line proves a program starts (the shared one finds the installed
# libein.so); it exits 2 without arguments.
foreach(program ein-embed-c ein-embed-c-shared)
  execute_process(COMMAND ${WORK_DIR}/build/${program} RESULT_VARIABLE result ERROR_VARIABLE output)
  if(NOT result EQUAL 2 OR NOT output MATCHES "usage:")
    message(FATAL_ERROR "${program} did not run: ${result} ${output}")
  endif()
endforeach()
