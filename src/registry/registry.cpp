// The kernels directory, indexed by content.
#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include <fmt/format.h>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/registry/registry.hpp"
#include "kern/base/sha256.hpp"

namespace kern::registry {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string short_hash(std::string_view sha) { return std::string(sha.substr(0, 12)) + "…"; }

void classify(Artifact& a, const std::string& bytes) {
  try {
    a.kind = artifact_kind(as_bytes(bytes), a.path);
    a.images = extract_device_images(as_bytes(bytes), a.path).size();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::KernelArtifact) throw;
    a.kind.reset();
    a.images = 0;
    a.problem = e.message();
  }
}

}  // namespace

Registry Registry::scan(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) fail(ErrorKind::Io, "cannot list kernels dir {}: {}", dir, ec.message());
  std::vector<std::string> names;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) fail(ErrorKind::Io, "cannot list kernels dir {}: {}", dir, ec.message());
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code sec;
    if (!fs::is_regular_file(it->path(), sec)) continue;  // follows symlinks
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());

  Registry r;
  r.dir_ = dir;
  std::map<std::string, Artifact> by_hash;  // ordered: deterministic
  for (const auto& name : names) {
    std::string path = (fs::path(dir) / name).string();
    std::string bytes = read_file(path);
    std::string sha = to_hex(sha256(bytes));
    ++r.files_hashed_;
    auto found = by_hash.find(sha);
    if (found != by_hash.end()) {
      found->second.duplicates.push_back(path);  // names are visited in sorted order
      continue;
    }
    Artifact a;
    a.path = path;
    a.sha256 = sha;
    a.size = bytes.size();
    classify(a, bytes);
    by_hash.emplace(sha, std::move(a));
  }
  for (auto& [sha, a] : by_hash) r.artifacts_.push_back(std::move(a));
  return r;
}

const Artifact* Registry::find(std::string_view sha256) const {
  std::string key = lower(sha256);
  auto it = std::lower_bound(artifacts_.begin(), artifacts_.end(), key,
                             [](const Artifact& a, const std::string& k) { return a.sha256 < k; });
  return it != artifacts_.end() && it->sha256 == key ? &*it : nullptr;
}

const Artifact& Registry::lookup(std::string_view module, std::string_view sha256) const {
  if (!is_sha256_hex(sha256))
    fail(ErrorKind::KernelArtifact, "module `{}` is pinned to `{}`, which is not a sha256 (64 hex digits)", module,
         sha256);
  const Artifact* a = find(sha256);
  if (!a)
    fail(ErrorKind::KernelArtifact, "module `{}` pinned to sha256 {} is not in kernels dir {} ({} file{} hashed)",
         module, short_hash(lower(sha256)), dir_, files_hashed_, files_hashed_ == 1 ? "" : "s");
  if (!a->kind)
    fail(ErrorKind::KernelArtifact, "module `{}` pinned to sha256 {}: {} is not a kernel artifact: {}", module,
         short_hash(a->sha256), a->path, a->problem);
  return *a;
}

std::vector<DeviceImage> Registry::images(std::string_view module, std::string_view sha256) const {
  const Artifact& a = lookup(module, sha256);
  std::string bytes;
  try {
    bytes = read_file(a.path);
  } catch (const Error& e) {
    fail(ErrorKind::KernelArtifact, "module `{}` pinned to sha256 {}: {} can no longer be read: {}", module,
         short_hash(a.sha256), a.path, e.message());
  }
  std::string now = to_hex(kern::sha256(bytes));
  if (now != a.sha256)
    fail(ErrorKind::KernelArtifact,
         "module `{}` pinned to sha256 {}: {} changed since the kernels dir was hashed (sha256 now {})", module,
         short_hash(a.sha256), a.path, short_hash(now));
  return extract_device_images(as_bytes(bytes), a.path);
}

}  // namespace kern::registry
