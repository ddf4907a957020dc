# ctest driver: install convtune into a temporary prefix, build tests/consumer against it with
# find_package(convtune), and run it; then run the installed autotune.
set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build"
                        -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer with find_package(convtune) failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND "${WORK_DIR}/build/app" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer's best_forward output was wrong or it failed: ${rc}")
endif()
# The installed CLI must find the installed library by itself (its $ORIGIN-relative RPATH).
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH
                        "${prefix}/bin/autotune" tune "mb1ic3ih9oc4kh3ph1n\"installed\""
                        --db "${WORK_DIR}/cli-perfdb.sqlite" --threads 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc OR NOT out MATCHES "installed")
  message(FATAL_ERROR "the installed autotune did not run (exit ${rc}):\n${out}\n${err}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
