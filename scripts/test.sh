#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs a short libFuzzer run of every
# parser, then every host test (ctest; label `gpu` excluded: those run on a GPU machine
# through scripts/gpu-tests.sh). ctest's summary is the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
bash scripts/build.sh
bash scripts/fuzz.sh
ctest --test-dir "${KERN_BUILD_DIR:-build}" -LE gpu --output-on-failure -j"$(nproc)" --timeout 900
