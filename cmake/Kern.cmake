# Common settings every kern target links. No include path here: each layer publishes its own.
add_library(kern_common INTERFACE)
# g++ 12 and 13 report -Warray-bounds / -Wstringop-overflow / -Wstringop-overread inside libstdc++'s
# std::string code (and fmt's) for plain concatenations, depending on what got inlined (GCC's
# known false positives of these flow-based warnings); every host test also runs under ASan, which
# finds the real thing.
# In a unity build a .cpp is #included into the batch file, so g++ takes it for a header and
# -Wsubobject-linkage reports classes that hold types of the .cpp's own anonymous namespace.
target_compile_options(kern_common INTERFACE -Wall -Wextra -Wno-unused-parameter
                       $<$<CXX_COMPILER_ID:GNU>:-Wno-array-bounds -Wno-stringop-overflow -Wno-stringop-overread>
                       $<$<AND:$<CXX_COMPILER_ID:GNU>,$<BOOL:${CMAKE_UNITY_BUILD}>>:-Wno-subobject-linkage>
                       $<$<BOOL:${KERN_WERROR}>:-Werror>)
target_compile_definitions(kern_common INTERFACE SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY SPDLOG_HEADER_ONLY)
target_link_libraries(kern_common INTERFACE nlohmann_json::nlohmann_json fmt::fmt-header-only spdlog::spdlog_header_only)

# The layer graph is enforced by include paths. Layer L's public headers (include/kern/L/) are
# reachable only through an include root of L's own (<build>/layers/public/L, holding the one link
# kern/L -> include/kern/L); its private headers (src/L/, included as "L/x.hpp") only through
# <build>/layers/private/L. A target sees the public roots of the layers it links (PUBLIC deps
# pass theirs on, PRIVATE deps do not) and no private root but its own, so an include that
# crosses the declared graph fails to compile.
set(KERN_LAYER_ROOTS ${PROJECT_BINARY_DIR}/layers)
function(kern_layer_roots name)
  set(pub ${KERN_LAYER_ROOTS}/public/${name})
  set(priv ${KERN_LAYER_ROOTS}/private/${name})
  file(MAKE_DIRECTORY ${pub}/kern ${priv})
  if(EXISTS ${PROJECT_SOURCE_DIR}/include/kern/${name} AND NOT EXISTS ${pub}/kern/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/kern/${name} ${pub}/kern/${name} SYMBOLIC)
  endif()
  if(NOT EXISTS ${priv}/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${priv}/${name} SYMBOLIC)
  endif()
endfunction()

# The headers nearly every kern file includes (base's error.hpp brings fmt, json.hpp nlohmann's),
# parsed once per target instead of once per file: on the 2-core CI box they were the floor of
# every file's compile time (docs/notes.md "CI time").
function(kern_precompile target)
  target_precompile_headers(${target} PRIVATE <nlohmann/json.hpp> <fmt/format.h> <map> <memory> <string> <vector>
                            ${ARGN})
endfunction()

# kern_add_layer(name SOURCES... [DEPS layers whose headers this layer's public headers include]
#                [PRIVATE_DEPS layers its sources alone use]) -> static library kern_<name>
function(kern_add_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  kern_layer_roots(${name})
  add_library(kern_${name} STATIC ${L_SOURCES})
  target_include_directories(kern_${name} PUBLIC ${KERN_LAYER_ROOTS}/public/${name}
                                          PRIVATE ${KERN_LAYER_ROOTS}/private/${name})
  target_link_libraries(kern_${name} PUBLIC kern_common ${L_DEPS} PRIVATE ${L_PRIVATE_DEPS})
  kern_precompile(kern_${name})
endfunction()

# kern_white_box(target layer...): `target` (a test) may include these layers' private headers.
function(kern_white_box target)
  foreach(layer ${ARGN})
    target_include_directories(${target} PRIVATE ${KERN_LAYER_ROOTS}/private/${layer})
  endforeach()
endfunction()

# kern_add_host_test(name SOURCES... [DEPS ...] [LABELS ...] [WHITE_BOX layers whose private headers it tests]
#                    [PREFIX p: ctest names are p.Suite.Test]) -> gtest executable, tests discovered by ctest
function(kern_add_host_test name)
  cmake_parse_arguments(T "" "PREFIX" "SOURCES;DEPS;LABELS;WHITE_BOX" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE kern_common GTest::gtest GTest::gtest_main GTest::gmock ${T_DEPS})
  kern_white_box(${name} ${T_WHITE_BOX})
  target_compile_definitions(${name} PRIVATE KERN_SOURCE_DIR="${PROJECT_SOURCE_DIR}" KERN_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # Test code is compiled for build time, the layers it tests keep the build type's flags: -O1
  # with line tables (the sanitized tree sets its own) takes ~60 % of -O2 -g on these JSON- and
  # gtest-heavy files, and the three heaviest headers are parsed once per test target, not once
  # per file (docs/notes.md "CI time").
  if(NOT KERN_BUILD_FUZZ)
    target_compile_options(${name} PRIVATE -O1 -g1)
  endif()
  kern_precompile(${name} <gtest/gtest.h> <gmock/gmock.h>)
  if(NOT T_LABELS)
    set(T_LABELS host)
  endif()
  set(prefix)
  if(T_PREFIX)
    set(prefix TEST_PREFIX ${T_PREFIX}.)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST WORKING_DIRECTORY ${PROJECT_BINARY_DIR} ${prefix}
                       PROPERTIES LABELS "${T_LABELS}" TIMEOUT 600)
endfunction()
