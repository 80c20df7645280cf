#!/usr/bin/env bash
# The test command: installs what is missing, builds (g++, -Werror), runs a short libFuzzer run
# of every parser, every host test under ASan + UBSan (clang-14, the fuzz tree), then every host
# test of the g++ build (ctest). It builds what it runs: the kernels (nvcc, warnings are errors)
# and the host tests, not the GPU tests or the micro-benchmarks (built with scripts/build.sh for
# a GPU machine, where scripts/gpu-tests.sh runs them). ctest's summary is the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
# No debug info in CI's g++ tree: nothing reads it there (the sanitized tree keeps line tables for its reports).
# Both trees are unity builds (CMAKE_UNITY_BUILD: a target's files compiled in batches of 8, so the
# header-only libraries' code is compiled once per batch, not once per file; docs/notes.md "CI time").
# A development build (scripts/build.sh) compiles every file on its own.
export KERN_UNITY=ON
bash scripts/build.sh -DKERN_WERROR=ON -DKERN_BUILD_GPU_TESTS=OFF -DKERN_BUILD_BENCH=OFF \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG" -DCMAKE_UNITY_BUILD=$KERN_UNITY
bash scripts/fuzz.sh
bash scripts/sanitize.sh
ctest --test-dir "${KERN_BUILD_DIR:-build}" -LE gpu --output-on-failure -j"$(nproc)" --timeout 900
