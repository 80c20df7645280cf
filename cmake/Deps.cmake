# Every dependency comes from Debian packages. Header-only or static where the package
# allows, so the kern binary built on Debian 12 runs unchanged on the GPU machine.
#
# KERN_DEPS_ROOT: a directory the Debian 12 packages of third_party/offline were unpacked into
# (scripts/setup-deps.sh's offline path makes .deps/root; scripts/build.sh passes it). When set,
# every dependency below is taken from there, before the system, and checked to come from there.
set(KERN_DEPS_ROOT "" CACHE PATH "Root of unpacked offline Debian packages (.deps/root); empty: the system's packages")
set(kern_deps_include)
set(kern_deps_libdir)
if(KERN_DEPS_ROOT)
  if(NOT IS_DIRECTORY ${KERN_DEPS_ROOT}/usr/include)
    message(FATAL_ERROR "KERN_DEPS_ROOT=${KERN_DEPS_ROOT} has no usr/include: run scripts/setup-deps.sh")
  endif()
  set(kern_deps_include ${KERN_DEPS_ROOT}/usr/include)
  set(kern_deps_libdir ${KERN_DEPS_ROOT}/usr/lib/x86_64-linux-gnu)
  list(PREPEND CMAKE_PREFIX_PATH ${KERN_DEPS_ROOT}/usr ${kern_deps_libdir}/cmake)
  set(OPENSSL_ROOT_DIR ${KERN_DEPS_ROOT}/usr)
  message(STATUS "kern: dependencies from KERN_DEPS_ROOT=${KERN_DEPS_ROOT}")
endif()

# With KERN_DEPS_ROOT, fails unless every path named is inside it (a package found on the
# system instead would hide a missing one until the build runs where the system has none).
function(kern_require_in_deps_root what)
  if(NOT KERN_DEPS_ROOT)
    return()
  endif()
  foreach(p ${ARGN})
    file(REAL_PATH "${p}" real)
    file(REAL_PATH "${KERN_DEPS_ROOT}" root)
    string(FIND "${real}/" "${root}/" at)
    if(NOT at EQUAL 0)
      message(FATAL_ERROR "${what} was found at ${p}, outside KERN_DEPS_ROOT=${KERN_DEPS_ROOT}")
    endif()
  endforeach()
endfunction()

find_package(nlohmann_json 3.11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
kern_require_in_deps_root("nlohmann_json" ${nlohmann_json_DIR})
kern_require_in_deps_root("fmt" ${fmt_DIR})
kern_require_in_deps_root("spdlog" ${spdlog_DIR})
kern_require_in_deps_root("CLI11" ${CLI11_DIR})

# toml++ is used header-only (TOML_HEADER_ONLY=1): include directories only, never its shared library.
if(KERN_DEPS_ROOT)
  # Debian's tomlplusplus.pc says prefix=/usr, so pkg-config would point at the system: look in the root.
  find_path(KERN_TOMLPP_INCLUDE toml++/toml.h PATHS ${kern_deps_include} NO_DEFAULT_PATH REQUIRED)
  set(TOMLPP_INCLUDE_DIRS ${KERN_TOMLPP_INCLUDE})
else()
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(TOMLPP REQUIRED tomlplusplus)
endif()
add_library(kern_tomlpp INTERFACE)
target_include_directories(kern_tomlpp INTERFACE ${TOMLPP_INCLUDE_DIRS})
target_compile_definitions(kern_tomlpp INTERFACE TOML_HEADER_ONLY=1)

set(OPENSSL_USE_STATIC_LIBS TRUE)
if(KERN_DEPS_ROOT)
  # Explicit paths: FindOpenSSL's own search misses lib/x86_64-linux-gnu when the compiler gives
  # CMake no library architecture (seen with /opt/gcc on the GPU machine) and then takes the
  # system's libcrypto.a through pkg-config.
  find_path(OPENSSL_INCLUDE_DIR openssl/evp.h PATHS ${kern_deps_include} NO_DEFAULT_PATH REQUIRED)
  find_library(OPENSSL_CRYPTO_LIBRARY NAMES libcrypto.a PATHS ${kern_deps_libdir} NO_DEFAULT_PATH REQUIRED)
  find_library(OPENSSL_SSL_LIBRARY NAMES libssl.a PATHS ${kern_deps_libdir} NO_DEFAULT_PATH REQUIRED)
endif()
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
# Boost.Beast + Boost.Asio (kern serve's HTTP server): headers only, nothing linked.
find_package(boost_headers 1.81 REQUIRED CONFIG)
kern_require_in_deps_root("Boost headers" ${boost_headers_DIR})
if(KERN_DEPS_ROOT)
  kern_require_in_deps_root("OpenSSL" ${OPENSSL_INCLUDE_DIR} ${OPENSSL_CRYPTO_LIBRARY})
  # Debian keeps openssl/configuration.h in the multiarch include directory.
  set_property(TARGET OpenSSL::Crypto APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${kern_deps_include}/x86_64-linux-gnu)
endif()

if(KERN_DEPS_ROOT)
  find_library(PCRE2_STATIC NAMES libpcre2-8.a PATHS ${kern_deps_libdir} NO_DEFAULT_PATH REQUIRED)
  find_path(PCRE2_INCLUDE pcre2.h PATHS ${kern_deps_include} NO_DEFAULT_PATH REQUIRED)
  find_library(UTF8PROC_STATIC NAMES libutf8proc.a PATHS ${kern_deps_libdir} NO_DEFAULT_PATH REQUIRED)
  find_path(UTF8PROC_INCLUDE utf8proc.h PATHS ${kern_deps_include} NO_DEFAULT_PATH REQUIRED)
endif()
find_library(PCRE2_STATIC NAMES libpcre2-8.a REQUIRED)
find_path(PCRE2_INCLUDE pcre2.h REQUIRED)
find_library(UTF8PROC_STATIC NAMES libutf8proc.a REQUIRED)
find_path(UTF8PROC_INCLUDE utf8proc.h REQUIRED)
kern_require_in_deps_root("PCRE2" ${PCRE2_STATIC} ${PCRE2_INCLUDE})
kern_require_in_deps_root("utf8proc" ${UTF8PROC_STATIC} ${UTF8PROC_INCLUDE})
# libnuma (set_mempolicy for the host tier's pinned block), linked statically: the binary needs no libnuma.so.
if(KERN_DEPS_ROOT)
  find_library(KERN_NUMA_LIBRARY NAMES libnuma.a PATHS ${kern_deps_libdir} NO_DEFAULT_PATH REQUIRED)
  find_path(NUMA_INCLUDE numaif.h PATHS ${kern_deps_include} NO_DEFAULT_PATH REQUIRED)
endif()
find_library(KERN_NUMA_LIBRARY NAMES libnuma.a REQUIRED)
find_path(NUMA_INCLUDE numaif.h REQUIRED)
kern_require_in_deps_root("libnuma" ${KERN_NUMA_LIBRARY} ${NUMA_INCLUDE})

# The CUDA toolkit is used for headers only (cuda.h, cublasLt.h, nccl.h); nothing links it.
find_path(CUDA_DRIVER_INCLUDE cuda.h PATHS /usr/local/cuda/include /usr/local/cuda/targets/x86_64-linux/include)

if(KERN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(KERN_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
