# te_add_test(<name> SOURCES <files...> LIBS <targets...> LABELS <labels...> [TIMEOUT <s>]
#             [COST <s>] [LOCK <resource>] [RUNS_BINARY] [DEFINES <defs...>]
#             [INCLUDES <dirs...>])
# Builds a GoogleTest executable and registers it with CTest under its labels
# (unit, conformance, integration, drill, load, slow). RUNS_BINARY: the test
# starts the `taskengine` binary, whose path it gets as TASKENGINE_BIN. Tests labelled `load`
# (the sized, process-heavy drills) are left out when
# TASKENGINE_BUILD_LOAD_DRILLS is OFF: the sanitizer trees skip what the
# Release tree runs at full CI size.
#
# Test code is compiled with TASKENGINE_TEST_OPT (default -O1) whatever the
# build type: it drives the libraries, which keep the build type's flags, and
# is not itself hot; -O3 made the test sources most of the build time. The
# ASan+UBSan preset adds -fno-sanitize=all: the product code is instrumented,
# the GoogleTest-heavy test code that drives it is not (src/core/schedule_test.cc
# with gcc and -g1: 28.3 s to compile instrumented, 8.9 s not).
#
# TASKENGINE_TEST_LABELS (a list; empty = every test) builds only the tests
# with one of these labels: CI's Release tree builds the drills only, and
# the ASan+UBSan tree everything else (see test.sh), so that no test source
# is compiled twice.
#
# COST: about how many seconds the test takes at CI size. `ctest -j` starts
# the costly tests first, so that a long drill does not begin last and run
# alone on one core while the other idles (CTest's own timing history, kept in
# the build tree, takes over once it exists). LOCK: tests naming the same
# resource never run at the same time (CTest's RESOURCE_LOCK). The sized load
# drills that keep both cores busy (RD9, RD10, RD11, the multi-node command
# drill) take `load`: side by side on 2 cores they took up to five times as
# long as each alone (RD10 315 s against 64 s), their workers starving each
# other past their leases.
option(TASKENGINE_BUILD_LOAD_DRILLS "Build the process-heavy load drills (label load)" ON)
set(TASKENGINE_TEST_LABELS "" CACHE STRING "Build only the tests with one of these labels (empty: all)")
set(TASKENGINE_TEST_OPT "-O1" CACHE STRING "Compile options (a list) for test sources")

# te_test_code(<target>): compile <target>'s own sources as test code.
function(te_test_code target)
  if(TASKENGINE_TEST_OPT)
    target_compile_options(${target} PRIVATE ${TASKENGINE_TEST_OPT})
  endif()
endfunction()

function(te_add_test name)
  cmake_parse_arguments(T "RUNS_BINARY" "TIMEOUT;COST;LOCK" "SOURCES;LIBS;LABELS;DEFINES;INCLUDES" ${ARGN})
  if(NOT TASKENGINE_BUILD_TESTS)
    return()
  endif()
  if("load" IN_LIST T_LABELS AND NOT TASKENGINE_BUILD_LOAD_DRILLS)
    return()
  endif()
  if(TASKENGINE_TEST_LABELS)
    set(wanted FALSE)
    foreach(label ${T_LABELS})
      if(label IN_LIST TASKENGINE_TEST_LABELS)
        set(wanted TRUE)
      endif()
    endforeach()
    if(NOT wanted)
      return()
    endif()
  endif()
  add_executable(${name} ${T_SOURCES})
  te_test_code(${name})
  if(T_RUNS_BINARY)
    target_compile_definitions(${name} PRIVATE TASKENGINE_BIN="$<TARGET_FILE:taskengine>")
    add_dependencies(${name} taskengine)
  endif()
  if(T_DEFINES)
    target_compile_definitions(${name} PRIVATE ${T_DEFINES})
  endif()
  if(T_INCLUDES)
    target_include_directories(${name} PRIVATE ${T_INCLUDES})
  endif()
  target_link_libraries(${name} PRIVATE ${T_LIBS} te_testing_support GTest::gtest GTest::gmock GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "TASKENGINE_SOURCE_DIR=${PROJECT_SOURCE_DIR};TASKENGINE_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(T_COST)
    set_tests_properties(${name} PROPERTIES COST ${T_COST})
  endif()
  if(T_LOCK)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK ${T_LOCK})
  endif()
endfunction()
