# Every dependency comes from Debian packages. Header-only or static where the package
# allows, so the kern binary built on Debian 12 runs unchanged on the GPU machine.
find_package(nlohmann_json 3.11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(TOMLPP REQUIRED tomlplusplus)
# toml++ is used header-only (TOML_HEADER_ONLY=1): include directories only, never its shared library.
add_library(kern_tomlpp INTERFACE)
target_include_directories(kern_tomlpp INTERFACE ${TOMLPP_INCLUDE_DIRS})
target_compile_definitions(kern_tomlpp INTERFACE TOML_HEADER_ONLY=1)

set(OPENSSL_USE_STATIC_LIBS TRUE)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

find_library(PCRE2_STATIC NAMES libpcre2-8.a REQUIRED)
find_path(PCRE2_INCLUDE pcre2.h REQUIRED)
find_library(UTF8PROC_STATIC NAMES libutf8proc.a REQUIRED)
find_path(UTF8PROC_INCLUDE utf8proc.h REQUIRED)

# The CUDA toolkit is used for headers only (cuda.h, cublasLt.h, nccl.h); nothing links it.
find_path(CUDA_DRIVER_INCLUDE cuda.h PATHS /usr/local/cuda/include /usr/local/cuda/targets/x86_64-linux/include)

if(KERN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(KERN_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
