// parse_manifest: strict JSON, then a typed walk of the top level, vars, states, modules,
// topology and cut. Buffers, ops and programs have their own files (manifest_parse_*.cpp).
#include <array>

#include "kern/base/file.hpp"
#include "kern/base/sha256.hpp"
#include "manifest_wire.hpp"

namespace kern::core {

namespace wire {
namespace {

constexpr std::array<std::string_view, 11> kTopLevel = {"schema_version", "model",  "constants", "topology", "cut",
                                                        "vars",           "states", "buffers",   "modules",  "ops",
                                                        "programs"};

std::uint64_t read_schema_version(const Node& n) {
  const Json& j = n.json();
  if (j.is_string())
    n.fail("schema_version must be a literal integer, never a constant name (got \"{}\")",
           j.get_ref<const std::string&>());
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<std::int64_t>() >= 0))
    n.fail("expected a non-negative integer schema version, got {}",
           j.is_number() ? j.dump() : std::string(json_type_name(j)));
  return j.get<std::uint64_t>();
}

Var read_var(const Node& n) {
  Object o(n, "var", {"max"});
  return Var{read_u64(o.required("max"))};
}

HostState read_host_state(const Node& n) {
  Object o(n, "host state", {"dtype", "shape", "strides"});
  HostState h;
  h.dtype = read_dtype(o.required("dtype"));
  h.shape = read_u64_list(o.required("shape"));
  h.strides = read_u64_list(o.required("strides"));
  return h;
}

State read_state(const Node& n) {
  Object o(n, "state", {"bytes_per_token", "bytes_per_seq", "bytes", "host"});
  State s;
  if (auto f = o.optional("bytes_per_token")) s.bytes_per_token = read_u64(*f);
  if (auto f = o.optional("bytes_per_seq")) s.bytes_per_seq = read_u64(*f);
  if (auto f = o.optional("bytes")) s.bytes = read_u64(*f);
  if (auto f = o.optional("host")) s.host = read_host_state(*f);
  return s;
}

Module read_module(const Node& n) {
  Object o(n, "module", {"source", "sha256"});
  Module m;
  m.source = read_string(o.required("source"));
  m.sha256 = read_string(o.required("sha256"));
  return m;
}

std::map<std::string, std::uint64_t> read_topology(const Node& n) {
  Object o(n, "topology", {"groups"});
  return read_map(o.required("groups"), "groups map", [](const Node& g) { return read_u64(g); });
}

Cut read_cut(const Node& n) {
  Object o(n, "cut", {"id", "stage", "stages"});
  Cut c;
  c.id = read_string(o.required("id"));
  c.stage = read_u64(o.required("stage"));
  c.stages = read_u64(o.required("stages"));
  return c;
}

Manifest read_manifest(const Node& root) {
  Object o(root, "manifest", kTopLevel);
  Manifest m;
  m.schema_version = read_schema_version(o.required("schema_version"));
  m.model = read_string(o.required("model"));
  if (auto f = o.optional("topology")) m.topology = read_topology(*f);
  if (auto f = o.optional("cut")) m.cut = read_cut(*f);
  if (auto f = o.optional("vars")) m.vars = read_map(*f, "vars map", read_var);
  if (auto f = o.optional("constants")) {
    for (const auto& [name, value] : root.constants().values())
      if (m.vars.count(name))
        f->member(name, f->json().at(name)).fail("constant \"{}\" has the same name as a var", name);
  }
  if (auto f = o.optional("states")) m.states = read_map(*f, "states map", read_state);
  m.buffers = read_map(o.required("buffers"), "buffers map", read_buffer);
  m.modules = read_map(o.required("modules"), "modules map", read_module);
  m.ops = read_map(o.required("ops"), "ops map", read_op);
  m.programs = read_map(o.required("programs"), "programs map", read_program);
  return m;
}

}  // namespace
}  // namespace wire

namespace {

// The strict JSON reader words structural errors as "<what>: duplicate key "k" at <path>" and
// "<what>: nesting deeper than N levels at <path>"; manifest errors put the path first, like
// every other parse error. Syntax errors (line and column, no path) pass unchanged.
std::string path_first(const std::string& message, std::string_view what) {
  const std::string prefix = std::string(what) + ": ";
  if (message.rfind(prefix, 0) != 0) return message;
  std::string_view rest = std::string_view(message).substr(prefix.size());
  const bool known = rest.rfind("duplicate key \"", 0) == 0 || rest.rfind("nesting deeper than ", 0) == 0;
  auto at = rest.rfind(" at ");
  if (!known || at == std::string_view::npos) return message;
  return fmt::format("{}: {}", rest.substr(at + 4), rest.substr(0, at));
}

}  // namespace

Manifest parse_manifest(std::string_view json_text, std::string_view what) {
  Json doc;
  try {
    doc = parse_json_strict(json_text, {ErrorKind::ManifestParse, what});
  } catch (const Error& e) {
    throw Error(ErrorKind::ManifestParse, path_first(e.message(), what));
  }
  // Constants first: every later numeric position may name one.
  wire::Constants none;
  wire::Node bare = wire::Node::root(doc, none);
  wire::Object top(bare, "manifest", wire::kTopLevel);
  wire::Constants constants;
  if (auto f = top.optional("constants")) constants = wire::Constants::read(*f);
  Manifest m = wire::read_manifest(wire::Node::root(doc, constants));
  m.digest = to_hex(sha256(json_text));
  return m;
}

Manifest parse_manifest_file(const std::string& path) { return parse_manifest(read_file(path), path); }

}  // namespace kern::core
