# te_add_test(<name> SOURCES <files...> LIBS <targets...> LABELS <labels...> [TIMEOUT <s>])
# Builds a GoogleTest executable and registers it with CTest under its labels
# (unit, conformance, integration, drill, e2e, slow).
function(te_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT TASKENGINE_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} te_testing_support GTest::gtest GTest::gmock GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "TASKENGINE_SOURCE_DIR=${PROJECT_SOURCE_DIR};TASKENGINE_BINARY_DIR=${PROJECT_BINARY_DIR}")
endfunction()
