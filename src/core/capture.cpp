#include "kern/core/capture.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "kern/base/error.hpp"

namespace kern::core {

namespace {

using Json = nlohmann::json;

[[noreturn]] void bad(std::size_t line, const std::string& what) {
  fail(ErrorKind::KernelArtifact, "capture line {}: {}", line, what);
}

void only_keys(const Json& j, std::size_t line, std::initializer_list<std::string_view> keys) {
  for (const auto& [k, v] : j.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) bad(line, fmt::format("unknown key \"{}\"", k));
}

std::uint64_t unsigned_of(const Json& j, std::size_t line, const char* key, std::uint64_t max) {
  const auto it = j.find(key);
  if (it == j.end()) bad(line, fmt::format("\"{}\" is missing", key));
  if (!it->is_number_unsigned()) bad(line, fmt::format("\"{}\" must be a non-negative integer", key));
  const std::uint64_t v = it->get<std::uint64_t>();
  if (v > max) bad(line, fmt::format("\"{}\" is {}, above {}", key, v, max));
  return v;
}

std::string string_of(const Json& j, std::size_t line, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) bad(line, fmt::format("\"{}\" is missing", key));
  if (!it->is_string()) bad(line, fmt::format("\"{}\" must be a string", key));
  return it->get<std::string>();
}

bool is_sha256(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// [x, y, z] of positive integers, each at most its limit.
void dims_of(const Json& j, std::size_t line, const char* key, const std::uint64_t (&max)[3], std::uint32_t (&out)[3]) {
  const auto it = j.find(key);
  if (it == j.end()) bad(line, fmt::format("\"{}\" is missing", key));
  if (!it->is_array() || it->size() != 3) bad(line, fmt::format("\"{}\" must be [x, y, z]", key));
  for (int d = 0; d < 3; ++d) {
    const Json& v = (*it)[d];
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0 || v.get<std::uint64_t>() > max[d])
      bad(line, fmt::format("\"{}\"[{}] must be an integer in [1, {}]", key, d, max[d]));
    out[d] = static_cast<std::uint32_t>(v.get<std::uint64_t>());
  }
}

constexpr std::uint64_t kGridMax[3] = {2147483647u, 65535u, 65535u};
constexpr std::uint64_t kBlockMax[3] = {1024u, 1024u, 64u};
constexpr std::uint64_t kSharedMax = 1u << 20;  // above any GPU's per-block limit
constexpr std::uint64_t kParamBytesMax = 32764;  // the driver's kernel parameter limit

}  // namespace

Capture parse_capture(std::string_view text) {
  Capture c;
  std::map<std::string, std::size_t> index;  // hash -> modules[]
  bool header = false;
  std::size_t line = 0;
  for (std::size_t at = 0; at <= text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view s = text.substr(at, end - at);
    at = end + 1;
    ++line;
    if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    if (s.find_first_not_of(" \t") == std::string_view::npos) {
      if (end == text.size()) break;
      continue;
    }
    Json j;
    try {
      j = Json::parse(s);
    } catch (const Json::parse_error& e) {
      bad(line, fmt::format("not JSON (byte {}): {}", e.byte, e.what()));
    } catch (const Json::exception& e) {  // e.g. a number too large for a double (out_of_range 406)
      bad(line, fmt::format("not JSON: {}", e.what()));
    }
    if (!j.is_object()) bad(line, "a record must be a JSON object");
    if (!header) {
      only_keys(j, line, {"kern_capture", "program", "device"});
      if (unsigned_of(j, line, "kern_capture", UINT32_MAX) != 1)
        bad(line, "the header must say \"kern_capture\": 1 (the only version)");
      if (j.contains("program")) c.program = string_of(j, line, "program");
      if (j.contains("device")) c.device = string_of(j, line, "device");
      header = true;
      continue;
    }
    const std::string kind = string_of(j, line, "kind");
    if (kind == "module") {
      only_keys(j, line, {"kind", "sha256", "bytes", "format"});
      CaptureModule m{string_of(j, line, "sha256"), unsigned_of(j, line, "bytes", UINT64_MAX),
                      string_of(j, line, "format")};
      if (!is_sha256(m.sha256)) bad(line, "\"sha256\" must be 64 lowercase hex digits");
      if (m.bytes == 0) bad(line, "a module of 0 bytes");
      if (m.format != "cubin" && m.format != "fatbin" && m.format != "ptx" && m.format != "unknown")
        bad(line, fmt::format("unknown module format \"{}\" (cubin, fatbin, ptx, unknown)", m.format));
      const auto it = index.find(m.sha256);
      if (it == index.end()) {
        index.emplace(m.sha256, c.modules.size());
        c.modules.push_back(std::move(m));
      } else if (c.modules[it->second].bytes != m.bytes || c.modules[it->second].format != m.format) {
        bad(line, fmt::format("module {} recorded again with {} bytes ({}), first with {} ({})", m.sha256, m.bytes,
                              m.format, c.modules[it->second].bytes, c.modules[it->second].format));
      }
    } else if (kind == "launch") {
      only_keys(j, line, {"kind", "module", "entry", "grid", "block", "shared", "params", "graph", "ns", "runs"});
      CaptureLaunch l;
      l.line = line;
      const std::string module = string_of(j, line, "module");
      const auto it = index.find(module);
      if (it == index.end()) bad(line, fmt::format("a launch of module {}, not recorded before it", module));
      l.module = it->second;
      l.entry = string_of(j, line, "entry");
      if (l.entry.empty()) bad(line, "an empty entry name");
      dims_of(j, line, "grid", kGridMax, l.grid);
      dims_of(j, line, "block", kBlockMax, l.block);
      if (static_cast<std::uint64_t>(l.block[0]) * l.block[1] * l.block[2] > 1024)
        bad(line, "more than 1024 threads per block");
      l.shared = static_cast<std::uint32_t>(unsigned_of(j, line, "shared", kSharedMax));
      const auto p = j.find("params");
      if (p == j.end() || !p->is_array()) bad(line, "\"params\" must be an array of [offset, size]");
      std::uint64_t next = 0;
      for (std::size_t k = 0; k < p->size(); ++k) {
        const Json& e = (*p)[k];
        if (!e.is_array() || e.size() != 2 || !e[0].is_number_unsigned() || !e[1].is_number_unsigned())
          bad(line, fmt::format("params[{}] must be [offset, size]", k));
        const std::uint64_t off = e[0].get<std::uint64_t>(), size = e[1].get<std::uint64_t>();
        if (size == 0 || off < next || off + size > kParamBytesMax)
          bad(line, fmt::format("params[{}] = [{}, {}] overlaps the one before, is empty or ends past byte {}", k, off,
                                size, kParamBytesMax));
        next = off + size;
        l.params.push_back({static_cast<std::uint32_t>(off), static_cast<std::uint32_t>(size)});
      }
      if (j.contains("graph")) l.graph = unsigned_of(j, line, "graph", UINT64_MAX);
      if (j.contains("ns")) l.ns = unsigned_of(j, line, "ns", UINT64_MAX / 2);
      if (j.contains("runs")) {
        if (!l.ns) bad(line, "\"runs\" without \"ns\": runs count timed executions");
        l.runs = unsigned_of(j, line, "runs", UINT32_MAX);
        if (l.runs == 0) bad(line, "\"runs\" must be at least 1");
      } else if (l.ns) {
        l.runs = 1;
      }
      c.launches.push_back(std::move(l));
    } else {
      bad(line, fmt::format("unknown record kind \"{}\" (module, launch)", kind));
    }
    if (end == text.size()) break;
  }
  if (!header) fail(ErrorKind::KernelArtifact, "capture: empty (no header line)");
  return c;
}

std::string write_capture(const Capture& c) {
  Json h = {{"kern_capture", 1}};
  if (!c.program.empty()) h["program"] = c.program;
  if (!c.device.empty()) h["device"] = c.device;
  std::string out = h.dump() + "\n";
  std::vector<bool> written(c.modules.size(), false);
  auto module = [&](std::size_t m) {
    if (m >= c.modules.size()) fail(ErrorKind::Api, "write_capture: a launch of module {} of {}", m, c.modules.size());
    if (written[m]) return;
    written[m] = true;
    const CaptureModule& x = c.modules[m];
    out += Json{{"kind", "module"}, {"sha256", x.sha256}, {"bytes", x.bytes}, {"format", x.format}}.dump() + "\n";
  };
  for (const CaptureLaunch& l : c.launches) {
    module(l.module);
    Json j = {{"kind", "launch"},
              {"module", c.modules[l.module].sha256},
              {"entry", l.entry},
              {"grid", {l.grid[0], l.grid[1], l.grid[2]}},
              {"block", {l.block[0], l.block[1], l.block[2]}},
              {"shared", l.shared},
              {"params", Json::array()}};
    for (const CaptureParam& p : l.params) j["params"].push_back({p.offset, p.size});
    if (l.graph) j["graph"] = *l.graph;
    if (l.ns) j["ns"] = *l.ns;
    if (l.ns && l.runs > 1) j["runs"] = l.runs;
    out += j.dump() + "\n";
  }
  for (std::size_t m = 0; m < c.modules.size(); ++m) module(m);  // modules nothing launched
  return out;
}

std::vector<std::optional<std::size_t>> assign_modules(const std::vector<ModuleSymbols>& images,
                                                       const std::vector<std::vector<std::string>>& names_per_handle) {
  auto holds = [&](std::size_t m, const std::string& name) {
    const std::vector<std::string>& f = images[m].functions;
    return std::binary_search(f.begin(), f.end(), name);
  };
  std::vector<std::optional<std::size_t>> out;
  out.reserve(names_per_handle.size());
  for (const std::vector<std::string>& names : names_per_handle) {
    std::optional<std::size_t> all, first;
    for (std::size_t m = 0; m < images.size(); ++m) {
      if (names.empty() || !holds(m, names.front())) continue;
      first = m;  // the last loaded wins
      if (std::all_of(names.begin(), names.end(), [&](const std::string& n) { return holds(m, n); })) all = m;
    }
    out.push_back(all ? all : first);
  }
  return out;
}

CaptureSummary summarize_capture(const Capture& c) {
  CaptureSummary s;
  s.modules = c.modules.size();
  std::map<std::pair<std::size_t, std::string>, CaptureKernel> by;  // ordered: deterministic
  for (const CaptureLaunch& l : c.launches) {
    CaptureKernel& k = by[{l.module, l.entry}];
    k.module = c.modules[l.module].sha256;
    k.entry = l.entry;
    ++k.launches;
    ++s.launches;
    if (l.graph) ++k.graph_launches, ++s.graph_launches;
    if (l.ns) {
      const std::uint64_t runs = std::max<std::uint64_t>(l.runs, 1);
      ++k.timed, ++s.timed, k.ns += *l.ns, s.ns += *l.ns, k.runs += runs, s.runs += runs;
    }
  }
  std::map<std::uint64_t, CaptureGraph> graphs;
  for (const CaptureLaunch& l : c.launches) {
    if (!l.graph) continue;
    CaptureGraph& g = graphs[*l.graph];
    g.id = *l.graph;
    ++g.nodes;
    if (l.ns) g.replays = std::max<std::uint64_t>(g.replays, std::max<std::uint64_t>(l.runs, 1)), g.ns += *l.ns;
  }
  for (auto& [id, g] : graphs) s.graphs.push_back(g);
  s.entries = by.size();
  for (auto& [key, k] : by) {
    k.share = s.ns > 0 ? static_cast<double>(k.ns) / static_cast<double>(s.ns) : 0.0;
    s.kernels.push_back(std::move(k));
  }
  std::stable_sort(s.kernels.begin(), s.kernels.end(), [](const CaptureKernel& a, const CaptureKernel& b) {
    return std::tie(b.ns, b.launches) < std::tie(a.ns, a.launches);
  });
  return s;
}

std::string describe(const CaptureSummary& s, std::size_t top) {
  std::string out =
      fmt::format("{} modules, {} entries, {} launches ({} graph kernel nodes), {} timed over {} runs: {:.3f} ms",
                  s.modules, s.entries, s.launches, s.graph_launches, s.timed, s.runs, static_cast<double>(s.ns) * 1e-6);
  out += fmt::format("\n{:>7} {:>9} {:>9} {:>12}  {:<12} {}", "share", "launches", "runs", "us", "module", "entry");
  for (std::size_t i = 0; i < s.kernels.size() && i < top; ++i) {
    const CaptureKernel& k = s.kernels[i];
    out += fmt::format("\n{:>6.1f}% {:>9} {:>9} {:>12.1f}  {:<12} {}", 100.0 * k.share, k.launches, k.runs,
                       static_cast<double>(k.ns) * 1e-3, k.module.substr(0, 12), k.entry);
  }
  if (s.kernels.size() > top) out += fmt::format("\n({} more)", s.kernels.size() - top);
  for (const CaptureGraph& g : s.graphs)
    out += fmt::format("\ngraph {}: {} kernel nodes, {} replays timed, {:.1f} us per replay", g.id, g.nodes, g.replays,
                       g.replays ? static_cast<double>(g.ns) * 1e-3 / static_cast<double>(g.replays) : 0.0);
  return out;
}

}  // namespace kern::core
