# Common settings every kern target links.
add_library(kern_common INTERFACE)
target_include_directories(kern_common INTERFACE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_compile_options(kern_common INTERFACE -Wall -Wextra -Wno-unused-parameter)
target_compile_definitions(kern_common INTERFACE SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY SPDLOG_HEADER_ONLY)
target_link_libraries(kern_common INTERFACE nlohmann_json::nlohmann_json fmt::fmt-header-only spdlog::spdlog_header_only)

# kern_add_layer(name SOURCES... [DEPS ...]) -> static library kern_<name>
function(kern_add_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS" ${ARGN})
  add_library(kern_${name} STATIC ${L_SOURCES})
  target_link_libraries(kern_${name} PUBLIC kern_common ${L_DEPS})
endfunction()

# kern_add_host_test(name SOURCES... [DEPS ...] [LABELS ...]) -> gtest executable, tests discovered by ctest
function(kern_add_host_test name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE kern_common GTest::gtest GTest::gtest_main GTest::gmock ${T_DEPS})
  target_compile_definitions(${name} PRIVATE KERN_SOURCE_DIR="${PROJECT_SOURCE_DIR}" KERN_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(NOT T_LABELS)
    set(T_LABELS host)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
                       PROPERTIES LABELS "${T_LABELS}" TIMEOUT 600)
endfunction()
