#!/usr/bin/env bash
# Packs what a device round needs from a build made here into one xz tarball (the device tool
# carries 64 MiB): ctest's files and the gtest lists, bin/kern and every GPU test executable
# (stripped), kern capture's injection library (CaptureGpu.* needs it: session 37's suite failed
# that test without it), the fatbins and cubins; no objects, no static libraries, no host tests.
# Usage (repo root): bash scripts/dev/pack.sh [build dir (build)] [tarball (.devrun/pack.txz)] [extra files...]
# The tarball unpacks to the build dir's name; scripts/gpu-tests.sh runs from it.
set -euo pipefail
build=${1:-build}
out=${2:-.devrun/pack.txz}
shift $(($# > 2 ? 2 : $#))
name=$(basename "$build")
tmp=$(mktemp -d)
stage=$tmp/$name
mkdir -p "$stage" "$(dirname "$out")"
(cd "$build" && find . \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \
    -o -name CMakeCache.txt -o -name '*.fatbin' -o -name '*.cubin' \) -not -path '*/CMakeFiles/*' -print0 |
  tar --null -T - -cf - | tar -xf - -C "$stage")
for exe in bin/kern lib/libkern_capture.so $(cd "$build" && find tests/gpu -type f -executable -not -path '*/CMakeFiles/*' -not -name '*.cmake') "$@"; do
  [ -f "$build/$exe" ] || continue
  mkdir -p "$stage/$(dirname "$exe")"
  strip -o "$stage/$exe" "$build/$exe" 2>/dev/null || cp "$build/$exe" "$stage/$exe"
done
# -9: its 64 MiB dictionary spans every executable, which share most of their bytes (static kern
# libraries): 8.9 MB where -3 made 22 MB (session 36), which with the tracked tree passed the
# device tool's 64 MiB.
tar -C "$tmp" -cf - "$name" | xz -T2 -9 >"$out"
rm -rf "$tmp"
echo "pack: $out ($(du -h "$out" | cut -f1))"
