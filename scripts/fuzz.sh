#!/usr/bin/env bash
# Builds every libFuzzer target (clang-14, ASan + UBSan) and runs each for FUZZ_SECONDS
# (default 10: a smoke run; campaigns run by hand, docs/notes.md) from its seed corpus. Any crash or sanitizer report fails the script.
# The tree (build-fuzz) is configured with the host tests too: scripts/sanitize.sh builds and
# runs them there, so the sanitized libraries are compiled once for both.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KERN_FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-10}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DKERN_BUILD_FUZZ=ON -DKERN_BUILD_TESTS=ON -DKERN_BUILD_BENCH=OFF -DKERN_BUILD_CUDA=OFF \
  -DCMAKE_UNITY_BUILD="${KERN_UNITY:-OFF}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fsanitize=fuzzer-no-link" >/dev/null
targets=$(cd tests/fuzz && ls fuzz_*.cpp 2>/dev/null | sed 's/\.cpp$//')
[ -n "$targets" ] || { echo "fuzz: no targets"; exit 1; }
ninja -C "$build" -j"$(nproc)" $targets
passed=0
failed=0
for t in $targets; do
  name=${t#fuzz_}
  corpus=tests/fuzz/corpus/$name
  work=$(mktemp -d)
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  echo "fuzz: $t for ${seconds}s"
  if "$build/tests/fuzz/$t" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
       -print_final_stats=0 "$work" >"$work.log" 2>&1; then
    passed=$((passed + 1))
    grep -E "^#[0-9]+ *DONE|Done [0-9]+ runs" "$work.log" | tail -1 || true
  else
    failed=$((failed + 1))
    echo "fuzz: $t FAILED"; tail -40 "$work.log"
  fi
  rm -rf "$work" "$work.log"
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
