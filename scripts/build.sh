#!/usr/bin/env bash
# Configures and builds kern into ${KERN_BUILD_DIR:-build} (Ninja, RelWithDebInfo).
# Extra arguments go to cmake (they win over what this script chooses).
# - .deps/cmake-args (written by scripts/setup-deps.sh's offline path) points cmake at the
#   unpacked offline packages; without it the system's packages are used.
# - Tests and benchmarks are configured only when GoogleTest / Google Benchmark can be found
#   (the main job needs neither).
# - nvcc: /usr/local/cuda/bin/nvcc, else the one on PATH; without one, no kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KERN_BUILD_DIR:-build}
args=()

deps_root=
if [ -f .deps/cmake-args ]; then
  while IFS= read -r a; do
    [ -n "$a" ] || continue
    args+=("$a")
    case "$a" in -DKERN_DEPS_ROOT=*) deps_root=${a#-DKERN_DEPS_ROOT=} ;; esac
  done < .deps/cmake-args
  echo "build: dependencies from ${deps_root:-?} (.deps/cmake-args)" >&2
else
  args+=(-DKERN_DEPS_ROOT=)
fi
# Switching between the system's packages and .deps/root: find results are cached, start afresh.
if [ -f "$build/CMakeCache.txt" ]; then
  cached=$(sed -n 's/^KERN_DEPS_ROOT:[A-Z]*=//p' "$build/CMakeCache.txt")
  if [ "$cached" != "$deps_root" ]; then
    echo "build: KERN_DEPS_ROOT changed ('$cached' -> '$deps_root'): reconfiguring $build from scratch" >&2
    rm -f "$build/CMakeCache.txt"
  fi
fi

# has <header> <library name>...: the header and one of the libraries (static or shared) exist
# under the offline root or a usual system prefix.
has() {
  local header=$1 lib p d found=0
  shift
  for p in ${deps_root:+"$deps_root/usr"} /usr /usr/local; do
    [ -f "$p/include/$header" ] || continue
    for lib in "$@"; do
      for d in "$p/lib/x86_64-linux-gnu" "$p/lib64" "$p/lib"; do
        if [ -e "$d/lib$lib.a" ] || [ -e "$d/lib$lib.so" ]; then found=1; fi
      done
    done
    [ "$found" = 1 ] && return 0
  done
  return 1
}
tests=ON
if ! has gtest/gtest.h gtest || ! has gmock/gmock.h gmock; then
  tests=OFF
  echo "build: GoogleTest/GoogleMock not found: tests are not configured" >&2
fi
bench=ON
if ! has benchmark/benchmark.h benchmark; then
  bench=OFF
  echo "build: Google Benchmark not found: benchmarks are not configured" >&2
fi
args+=(-DKERN_BUILD_TESTS=$tests -DKERN_BUILD_BENCH=$bench)

cuda=ON
if [ -x /usr/local/cuda/bin/nvcc ]; then
  :
elif nvcc=$(command -v nvcc); then
  # A toolkit elsewhere: its nvcc for the kernels, its headers for the dlopen shell.
  args+=("-DKERN_NVCC=$nvcc")
  for inc in "$(dirname "$nvcc")/../include" "$(dirname "$nvcc")/../targets/x86_64-linux/include"; do
    if [ -f "$inc/cuda.h" ]; then args+=("-DCUDA_DRIVER_INCLUDE=$(cd "$inc" && pwd)"); break; fi
  done
else
  cuda=OFF
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKERN_BUILD_CUDA=$cuda "${args[@]}" "$@" >/dev/null
# KERN_BUILD_TARGETS: only these targets (e.g. "kern kern_kernels"); default: everything.
ninja -C "$build" -j"${KERN_BUILD_JOBS:-$(nproc)}" ${KERN_BUILD_TARGETS:-}
# Refresh the gtest lists ctest runs (discovered when ctest first reads the build): a build
# carried to a GPU machine must name every test it contains (scripts/gpu-tests.sh keeps them).
if [ -z "${KERN_BUILD_TARGETS:-}" ]; then
  ctest --test-dir "$build" -N >/dev/null 2>&1 || true
fi
