#include "config.hpp"

// Header-only toml++ so the kern binary does not depend on libtomlplusplus.so at run time.
#undef TOML_HEADER_ONLY
#define TOML_HEADER_ONLY 1
#undef TOML_SHARED_LIB
#define TOML_SHARED_LIB 0
#include <toml++/toml.h>

#include <filesystem>
#include <sstream>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"

namespace kern::cli {

namespace fs = std::filesystem;

namespace {

struct Reader {
  std::string file;
  fs::path base;  // the toml's folder

  [[noreturn]] void bad(const std::string& key, const std::string& why) const {
    fail(ErrorKind::Api, "{}: `{}` {}", file, key, why);
  }

  std::string path_value(const toml::node& n, const std::string& key) const {
    const auto* s = n.as_string();
    if (!s) bad(key, "must be a string (a path)");
    std::string v = s->get();
    if (v.empty()) bad(key, "must not be empty");
    fs::path p(v);
    return (p.is_absolute() ? p : base / p).lexically_normal().string();
  }

  std::string string_value(const toml::node& n, const std::string& key) const {
    const auto* s = n.as_string();
    if (!s) bad(key, "must be a string");
    return s->get();
  }

  std::int64_t int_value(const toml::node& n, const std::string& key, std::int64_t lo) const {
    const auto* i = n.as_integer();
    if (!i) bad(key, "must be an integer");
    if (i->get() < lo) bad(key, fmt::format("must be at least {} (is {})", lo, i->get()));
    return i->get();
  }

  const toml::table& table_value(const toml::node& n, const std::string& key) const {
    const auto* t = n.as_table();
    if (!t) bad(key, "must be a table");
    return *t;
  }

  Target target(const std::string& name, const toml::table& t) const {
    Target out;
    out.name = name;
    std::string prefix = "targets." + name + ".";
    for (const auto& [k, v] : t) {
      std::string key(k.str());
      std::string full = prefix + key;
      if (key == "manifest")
        out.manifest = path_value(v, full);
      else if (key == "kernels")
        out.kernels = path_value(v, full);
      else if (key == "tokenizer")
        out.tokenizer = path_value(v, full);
      else if (key == "weights") {
        if (v.is_string()) {
          out.weights.push_back(path_value(v, full));
        } else if (const auto* a = v.as_array()) {
          for (std::size_t i = 0; i < a->size(); ++i)
            out.weights.push_back(path_value(*a->get(i), fmt::format("{}[{}]", full, i)));
        } else {
          bad(full, "must be a path or an array of paths");
        }
      } else {
        bad(full, "is not a kern.toml key (targets take manifest, kernels, weights, tokenizer)");
      }
    }
    return out;
  }

  Config config(const toml::table& root) const {
    Config c;
    c.path = file;
    for (const auto& [k, v] : root) {
      std::string key(k.str());
      if (key == "gpu") {
        c.gpu = int_value(v, key, 0);
      } else if (key == "targets") {
        for (const auto& [name, t] : table_value(v, key)) {
          std::string n(name.str());
          c.targets.emplace(n, target(n, table_value(t, "targets." + n)));
        }
      } else if (key == "run") {
        for (const auto& [rk, rv] : table_value(v, key)) {
          std::string r(rk.str());
          if (r == "prompt")
            c.run.prompt = string_value(rv, "run.prompt");
          else if (r == "steps")
            c.run.steps = int_value(rv, "run.steps", 0);
          else if (r == "target")
            c.run.target = string_value(rv, "run.target");
          else
            bad("run." + r, "is not a kern.toml key ([run] takes prompt, steps, target)");
        }
      } else {
        bad(key, "is not a kern.toml key (top level takes gpu, [targets.<name>], [run])");
      }
    }
    if (c.run.target && !c.targets.count(*c.run.target))
      bad("run.target", fmt::format("names no target (`{}`)", *c.run.target));
    return c;
  }
};

}  // namespace

std::optional<Target> Config::target(const std::string& name_or_default) const {
  std::string name = name_or_default;
  if (name.empty()) {
    if (run.target)
      name = *run.target;
    else if (targets.size() == 1)
      return targets.begin()->second;
    else
      return std::nullopt;
  }
  auto it = targets.find(name);
  if (it == targets.end()) {
    std::string known;
    for (const auto& [n, t] : targets) known += (known.empty() ? "" : ", ") + n;
    if (path.empty()) fail(ErrorKind::Api, "no target `{}`: no kern.toml was found", name);
    fail(ErrorKind::Api, "{}: no target `{}` (targets: {})", path, name, known.empty() ? "none" : known);
  }
  return it->second;
}

Config parse_config(const std::string& text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    fail(ErrorKind::Api, "{}:{}:{}: {}", path, where.line, where.column, e.description());
  }
  Reader r{path, fs::absolute(fs::path(path)).parent_path()};
  return r.config(root);
}

std::string find_config(const std::string& start) {
  std::error_code ec;
  fs::path dir = fs::absolute(fs::path(start), ec);
  if (ec) return {};
  while (true) {
    fs::path candidate = dir / "kern.toml";
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
    if (!dir.has_parent_path() || dir.parent_path() == dir) return {};
    dir = dir.parent_path();
  }
}

Config load_config(const std::string& explicit_path) {
  std::string path = explicit_path;
  if (path.empty()) {
    std::error_code ec;
    path = find_config(fs::current_path(ec).string());
    if (path.empty()) return {};
  }
  return parse_config(read_file(path), path);
}

}  // namespace kern::cli
