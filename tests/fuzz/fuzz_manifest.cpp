// fuzz-deps: kern_core kern_base
// libFuzzer target: manifest text -> parse_manifest -> check (the verifier). Any input must end
// in a parsed manifest or a kern::Error, never a crash, hang or sanitizer report. On manifests
// that parse, a few invariants of the typed model are checked too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/verify.hpp"

namespace {

using namespace kern::core;

void check_invariants(const Manifest& m) {
  std::map<std::string, std::uint64_t> at_max;
  for (const auto& [name, v] : m.vars) at_max[name] = v.max;
  VarLookup vars = lookup_in(at_max);
  for (const auto& [name, op] : m.ops) {
    for (const ParamType& p : op.params) {
      // The canonical spelling round-trips.
      auto again = parse_param_type(p.to_string());
      if (!again || again->to_string() != p.to_string()) __builtin_trap();
    }
    for (const Launch& l : op.impl.launches) {
      for (const Expr& g : l.grid) {
        (void)try_eval(g, vars);  // checked: any value or an EvalError, never UB
        std::vector<std::string> names;
        g.collect_vars(names);
        (void)g.to_string();
      }
    }
  }
  for (const auto& [name, b] : m.buffers) {
    try {
      (void)shape_elements(b.shape, vars, name);
    } catch (const kern::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    Manifest m = parse_manifest(text, "fuzz");
    check_invariants(m);
    (void)check(m);
  } catch (const kern::Error&) {
  }
  return 0;
}
