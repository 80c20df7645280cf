#!/usr/bin/env bash
# Installs what kern needs to build and test on Debian 12 (idempotent; quick when present).
# The CUDA 13 toolkit (nvcc, headers) is expected at /usr/local/cuda; nothing links it.
#
# Offline fallback: when packages are missing and apt cannot install them (no apt-get, or
# apt-get update/install fails or times out), or when KERN_OFFLINE_DEPS=1 is set, the Debian 12
# .deb files committed in third_party/offline (checked against their SHA256SUMS) are unpacked
# into .deps/root, and .deps/cmake-args tells scripts/build.sh to take the dependencies from
# there. cmake, ninja, g++ and nvcc must then already be on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

offline_dir=third_party/offline
deps_dir=.deps
deps_root=$deps_dir/root
cmake_args_file=$deps_dir/cmake-args

say() { echo "setup-deps: $*" >&2; }

# Checks the committed files against SHA256SUMS and unpacks every .deb into .deps/root (once
# per SHA256SUMS content), then writes .deps/cmake-args for scripts/build.sh.
use_offline_debs() {
  rm -f "$cmake_args_file"
  # What the .deb files cannot bring: the tools themselves.
  local missing_tools=() t
  for t in cmake ninja; do
    command -v "$t" >/dev/null 2>&1 || missing_tools+=("$t")
  done
  command -v g++ >/dev/null 2>&1 || command -v c++ >/dev/null 2>&1 || missing_tools+=(g++)
  [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1 || missing_tools+=(nvcc)
  if ((${#missing_tools[@]})); then
    say "error: ${missing_tools[*]} not found and cannot be installed here (no working apt); install them first"
    exit 1
  fi
  local sums=$offline_dir/SHA256SUMS
  [ -f "$sums" ] || { say "error: $sums is missing"; exit 1; }
  local tool
  for tool in sha256sum tar; do
    command -v "$tool" >/dev/null 2>&1 || { say "error: the offline path needs '$tool'"; exit 1; }
  done
  if ! (cd "$offline_dir" && sha256sum --check --quiet --strict SHA256SUMS) >&2; then
    say "error: files in $offline_dir do not match $sums"
    exit 1
  fi
  local stamp
  stamp=$(sha256sum "$sums" | cut -d' ' -f1)
  if [ -f "$deps_root/.kern-offline-stamp" ] && [ "$(cat "$deps_root/.kern-offline-stamp")" = "$stamp" ]; then
    say "offline: $deps_root is already unpacked from $offline_dir"
  else
    local unpack
    if command -v dpkg-deb >/dev/null 2>&1; then
      unpack=dpkg-deb
    elif command -v ar >/dev/null 2>&1; then
      unpack=ar
    else
      say "error: the offline path needs dpkg-deb or ar (binutils) to unpack .deb files"
      exit 1
    fi
    mkdir -p "$deps_dir"
    local abs_deps_dir tmp deb
    abs_deps_dir=$(cd "$deps_dir" && pwd -P)
    tmp=$(mktemp -d "$abs_deps_dir/unpack.XXXXXX")
    # The target is always a fresh directory inside .deps, never '/'.
    case "$tmp" in "$abs_deps_dir"/unpack.*) ;; *) say "error: bad unpack directory '$tmp'"; exit 1 ;; esac
    mkdir "$tmp/root" "$tmp/ar"
    while read -r _ deb; do
      deb=${deb#\*}
      case "$deb" in *.deb) ;; *) continue ;; esac
      if [ "$unpack" = dpkg-deb ]; then
        dpkg-deb -x "$offline_dir/$deb" "$tmp/root"
      else
        rm -rf "${tmp:?}/ar" && mkdir "$tmp/ar"
        (cd "$tmp/ar" && ar x "$repo/$offline_dir/$deb")
        local data=
        for data in "$tmp/ar"/data.tar*; do break; done
        [ -f "$data" ] || { say "error: $deb has no data.tar member"; exit 1; }
        tar -xf "$data" -C "$tmp/root" --no-same-owner
      fi
      say "offline: unpacked $deb"
    done < "$offline_dir/SHA256SUMS"
    echo "$stamp" > "$tmp/root/.kern-offline-stamp"
    rm -rf "$deps_root"
    mv "$tmp/root" "$deps_root"
    rm -rf "$tmp"
    say "offline: unpacked the .deb files of $offline_dir with $unpack into $deps_root"
  fi
  local abs_root
  abs_root=$(cd "$deps_root" && pwd -P)
  echo "-DKERN_DEPS_ROOT=$abs_root" > "$cmake_args_file"
  say "offline: wrote $cmake_args_file; scripts/build.sh takes the dependencies from $abs_root"

}

pkgs=(cmake ninja-build g++ pkg-config git nodejs
      nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libtomlplusplus-dev
      libssl-dev libpcre2-dev libutf8proc-dev libnuma-dev libboost1.81-dev libgtest-dev libgmock-dev libbenchmark-dev
      clang-14 libclang-rt-14-dev)

offline=0
if [ "${KERN_OFFLINE_DEPS:-0}" = 1 ]; then
  say "KERN_OFFLINE_DEPS=1: using the committed packages of $offline_dir, not apt"
  offline=1
else
  missing=()
  if command -v dpkg >/dev/null 2>&1; then
    for p in "${pkgs[@]}"; do
      dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
  else
    missing=("${pkgs[@]}")
  fi
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if ((${#missing[@]})); then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" != 0 ]; then
      say "missing packages ${missing[*]} and not root (apt-get cannot install); using the committed packages of $offline_dir"
      offline=1
    elif command -v apt-get >/dev/null 2>&1; then
      echo "setup-deps: installing ${missing[*]}" >&2
      export DEBIAN_FRONTEND=noninteractive
      # nodejs from nodesource already ships npm; only ask for npm when it is really absent.
      # Time limits, so that a machine without a reachable registry falls back instead of hanging.
      if timeout 120 apt-get update -qq &&
         timeout 1200 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
        :
      else
        say "apt-get could not install ${missing[*]}; falling back to the committed packages of $offline_dir"
        offline=1
      fi
    else
      say "missing packages ${missing[*]} and no apt-get to install them; using the committed packages of $offline_dir"
      offline=1
    fi
  fi
fi

if [ "$offline" = 1 ]; then
  use_offline_debs
elif [ -f "$cmake_args_file" ]; then
  # The system has every package: build against it again.
  rm -f "$cmake_args_file"
  say "all packages installed: removed $cmake_args_file (scripts/build.sh uses the system's packages)"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null 2>&1; then
  echo "setup-deps: warning: no CUDA toolkit at /usr/local/cuda (kernels and GPU tests will not be built)" >&2
fi

if [ -f scripts/setup-tokenizer.sh ]; then
  bash scripts/setup-tokenizer.sh
fi
if [ -f scripts/setup-openai-client.sh ]; then
  bash scripts/setup-openai-client.sh
fi
