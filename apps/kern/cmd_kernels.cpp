// kern kernels: lands kernel artifacts into a kernels dir as <module>-<sha12>.<ext> (add-only),
// or, without files, lists the dir's registry (hash, kind, images, path).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "command.hpp"
#include "config.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/base/log.hpp"
#include "kern/registry/registry.hpp"
#include "kern/base/sha256.hpp"

namespace kern::cli::cmd_kernels {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string kernels;
  std::string manifest;
  std::string target;
  std::vector<std::string> files;
};
Options opt;

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// modules.<name>.sha256 of a manifest, read directly (only this field matters here).
std::multimap<std::string, std::string> pinned_modules(const std::string& path) {
  Json doc = parse_json_strict(read_file(path), {ErrorKind::ManifestParse, path, 128});
  std::multimap<std::string, std::string> by_hash;  // sha256 (lowercase) -> module
  if (!doc.is_object() || !doc.contains("modules") || !doc["modules"].is_object())
    fail(ErrorKind::ManifestParse, "{}: `modules` must be an object", path);
  for (const auto& [name, m] : doc["modules"].items()) {
    std::string where = json_path_key("modules", name);
    if (!m.is_object() || !m.contains("sha256") || !m["sha256"].is_string())
      fail(ErrorKind::ManifestParse, "{}: {}.sha256 must be a string", path, where);
    std::string sha = m["sha256"].get<std::string>();
    if (!is_sha256_hex(sha))
      fail(ErrorKind::ManifestParse, "{}: {}.sha256 `{}` is not 64 hex digits", path, where, sha);
    for (char& c : sha) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    by_hash.emplace(sha, name);
  }
  return by_hash;
}

void check_module_name(const std::string& module, const std::string& source) {
  if (module.empty() || module.find('/') != std::string::npos || module[0] == '.')
    fail(ErrorKind::Api, "cannot land {}: `{}` is not usable as a module file name", source, module);
}

// Writes `bytes` to `dest` only if nothing is there; same content there = no-op.
// Returns true when a file was written.
bool land(const std::string& bytes, const std::string& sha, const std::string& dest) {
  if (fs::exists(dest)) {
    std::string there = sha256_file_hex(dest);
    if (there != sha)
      fail(ErrorKind::KernelArtifact, "{} already exists with different content (sha256 {}); kernels dirs are add-only",
           dest, there);
    return false;
  }
  std::string tmp = dest + ".landing";
  write_file(tmp, bytes);
  // link() refuses to replace an existing name: add-only even if another lander raced us.
  int rc = ::link(tmp.c_str(), dest.c_str());
  int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0) {
    if (err == EEXIST && sha256_file_hex(dest) == sha) return false;
    fail(ErrorKind::Io, "cannot land {}: {}", dest, std::strerror(err));
  }
  return true;
}

int list_registry(const std::string& dir) {
  registry::Registry r = registry::Registry::scan(dir);
  for (const auto& a : r.artifacts()) {
    std::string kind = a.kind ? std::string(to_string(*a.kind)) : "not-an-artifact";
    std::printf("%s  %-15s %3zu  %s\n", a.sha256.c_str(), kind.c_str(), a.images, a.path.c_str());
    for (const auto& d : a.duplicates) std::printf("%64s  %-15s %3s  %s\n", "", "(same content)", "", d.c_str());
  }
  kern::log().info("{}: {} files hashed, {} distinct", dir, r.files_hashed(), r.artifacts().size());
  return 0;
}

int run() {
  if (opt.kernels.empty()) {
    Config cfg = load_config(globals().config);
    if (auto t = cfg.target(opt.target); t && !t->kernels.empty()) opt.kernels = t->kernels;
  }
  if (opt.kernels.empty())
    fail(ErrorKind::Api, "no kernels dir: pass --kernels DIR or set `kernels` in a kern.toml target");
  if (opt.files.empty()) return list_registry(opt.kernels);

  std::multimap<std::string, std::string> pinned;
  if (!opt.manifest.empty()) pinned = pinned_modules(opt.manifest);
  std::error_code ec;
  fs::create_directories(opt.kernels, ec);
  if (ec) fail(ErrorKind::Io, "cannot create kernels dir {}: {}", opt.kernels, ec.message());

  for (const auto& file : opt.files) {
    std::string bytes = read_file(file);
    std::string sha = to_hex(sha256(bytes));
    registry::ArtifactKind kind =
        registry::artifact_kind(as_bytes(bytes), file);  // refuse to land what the runtime could not load
    std::vector<std::string> modules;
    if (opt.manifest.empty()) {
      modules.push_back(fs::path(file).stem().string());
    } else {
      auto [lo, hi] = pinned.equal_range(sha);
      for (auto it = lo; it != hi; ++it) modules.push_back(it->second);
      if (modules.empty()) {
        kern::log().warn("{}: sha256 {} is pinned by no module of {}; skipped", file, sha.substr(0, 12), opt.manifest);
        continue;
      }
    }
    for (const auto& module : modules) {
      check_module_name(module, file);
      std::string dest =
          (fs::path(opt.kernels) / fmt::format("{}-{}.{}", module, sha.substr(0, 12), file_extension(kind))).string();
      bool wrote = land(bytes, sha, dest);
      std::printf("%s %s  %s\n", wrote ? "landed " : "present", sha.c_str(), dest.c_str());
    }
  }
  return 0;
}

Runner setup(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "kernels", "Land kernel artifacts into a kernels dir as <module>-<sha12>.<ext> (add-only), or list it");
  sub->add_option("--kernels", opt.kernels, "Kernels dir (default: the kern.toml target's)");
  sub->add_option("--manifest", opt.manifest,
                  "Land only files some module of this manifest pins, named after that module");
  sub->add_option("--target", opt.target, "kern.toml target supplying the kernels dir");
  sub->add_option("files", opt.files,
                  "Artifacts to land (cubin, fatbin, or host .so with .nv_fatbin); none: list the dir");
  return run;
}
Registrar reg("kernels", setup);

}  // namespace
}  // namespace kern::cli::cmd_kernels
