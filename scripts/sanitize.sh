#!/usr/bin/env bash
# The host tests under AddressSanitizer + UndefinedBehaviorSanitizer (clang-14), in the tree
# scripts/fuzz.sh configured (build-fuzz: every library is already compiled sanitized there).
# Any sanitizer report fails the test it happens in (UBSan does not recover; ASan aborts).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KERN_FUZZ_BUILD_DIR:-build-fuzz}
[ -f "$build/CMakeCache.txt" ] || { echo "sanitize: no $build (run scripts/fuzz.sh first)" >&2; exit 1; }
ninja -C "$build" -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "sanitize: host tests under ASan + UBSan ($build)"
ctest --test-dir "$build" -LE gpu --output-on-failure -j"$(nproc)" --timeout 900
