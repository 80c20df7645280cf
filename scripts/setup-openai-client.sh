#!/usr/bin/env bash
# Installs the official OpenAI client library (npm package `openai`, pinned) into
# third_party/npm, for the kern serve tests that talk to the server as users' programs do
# (tests/host/serve_http). Needs npm and the registry; without them the tests that need the
# client fail and say why (they are not skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=third_party/npm
package=openai
version=6.30.1
if [ -f "$prefix/node_modules/$package/package.json" ] &&
   grep -q "\"version\": \"$version\"" "$prefix/node_modules/$package/package.json"; then
  echo "openai client: $package@$version already installed" >&2
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "openai client: no npm; the kern serve client tests will fail until $package@$version is installed" >&2
  exit 0
fi
if timeout 300 npm install --prefix "$prefix" --no-audit --no-fund "$package@$version" >&2; then
  echo "openai client: installed $package@$version into $prefix" >&2
else
  echo "openai client: npm install $package@$version failed; the kern serve client tests will fail" >&2
fi
