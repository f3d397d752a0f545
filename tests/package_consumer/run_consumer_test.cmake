# CTest driver (cmake -P): installs the msa-oracle build into a scratch prefix, builds the consumer project
# against it with find_package(msa) and runs its programs. Variables (-D): MSA_BUILD_DIR, WORK_DIR, CONSUMER_DIR,
# CXX_COMPILER, CXX_LAUNCHER (may be empty), BUILD_TYPE, GENERATOR, MAKE_PROGRAM, JUDGE (ON/OFF).
cmake_minimum_required(VERSION 3.25)

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package_consumer: ${what} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run_step("cmake --install" ${CMAKE_COMMAND} --install ${MSA_BUILD_DIR} --prefix ${prefix} --config ${BUILD_TYPE})

# One file that includes every installed header.
file(GLOB_RECURSE headers RELATIVE ${prefix}/include/msa-oracle ${prefix}/include/msa-oracle/*.h)
set(all_headers "// Generated: every header of the installed msa package.\n")
foreach(header ${headers})
  string(APPEND all_headers "#include \"${header}\"\n")
endforeach()
file(WRITE ${WORK_DIR}/all_headers.cc "${all_headers}")

set(configure ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
    -DMSA_CONSUMER_JUDGE=${JUDGE} -DMSA_CONSUMER_ALL_HEADERS=${WORK_DIR}/all_headers.cc)
if(MAKE_PROGRAM)
  list(APPEND configure -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(CXX_LAUNCHER)
  list(APPEND configure -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
endif()
run_step("configure" ${configure})
run_step("build" ${CMAKE_COMMAND} --build ${build} -j 2 --config ${BUILD_TYPE})
foreach(program consumer consumer_msa)
  file(MAKE_DIRECTORY ${WORK_DIR}/${program}-files)
  run_step("run ${program}" ${build}/${program} ${WORK_DIR}/${program}-files)
  message("${program}: ${step_output}")
  if(NOT step_output MATCHES "consumer ok")
    message(FATAL_ERROR "package_consumer: ${program} did not print 'consumer ok'")
  endif()
endforeach()
# Only what a consumer links is installed: the tool's studies are not part of the package.
if(EXISTS ${prefix}/include/msa-oracle/tools)
  message(FATAL_ERROR "package_consumer: the tool's headers (tools/msa/) were installed")
endif()
