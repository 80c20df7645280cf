#!/usr/bin/env bash
# Installs what kern needs to build and test on Debian 12 (idempotent; quick when present).
# The CUDA 13 toolkit (nvcc, headers) is expected at /usr/local/cuda; nothing links it.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(cmake ninja-build g++ pkg-config git nodejs
      nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libtomlplusplus-dev
      libssl-dev libpcre2-dev libutf8proc-dev libgtest-dev libgmock-dev libbenchmark-dev
      clang-14 libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup-deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # nodejs from nodesource already ships npm; only ask for npm when it is really absent.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup-deps: missing packages ${missing[*]} and no apt-get to install them" >&2
    exit 1
  fi
fi

if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup-deps: warning: no CUDA toolkit at /usr/local/cuda (kernels and GPU tests will not be built)" >&2
fi

if [ -f scripts/setup-tokenizer.sh ]; then
  bash scripts/setup-tokenizer.sh
fi
