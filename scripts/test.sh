#!/usr/bin/env bash
# The test command: installs what is missing, builds (g++, -Werror), runs a short libFuzzer run
# of every parser, every host test under ASan + UBSan (clang-14, the fuzz tree), then every host
# test of the g++ build (ctest; label `gpu` excluded: those run on a GPU machine through
# scripts/gpu-tests.sh). ctest's summary is the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
bash scripts/build.sh -DKERN_WERROR=ON
bash scripts/fuzz.sh
bash scripts/sanitize.sh
ctest --test-dir "${KERN_BUILD_DIR:-build}" -LE gpu --output-on-failure -j"$(nproc)" --timeout 900
