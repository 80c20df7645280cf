// kern verify <manifest.json>: parse, verify and project the serving protocol; print a summary.
// Exit 0 when valid; 1 with every violation on stderr, one per line, path first; 2 for bad usage.
// A manifest with at least one batch program must also satisfy the serving protocol.
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "command.hpp"
#include "config.hpp"
#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/core/verify.hpp"

namespace kern::cli::cmd_verify {
namespace {

using namespace kern::core;

struct Options {
  std::string manifest;
  std::string target;
};

std::string dims(const std::vector<Dim>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i].is_var() ? shape[i].var : std::to_string(shape[i].value);
  }
  return s + "]";
}

std::string plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

void print_declarations(const Manifest& m) {
  auto at_max = [&](std::string_view v) -> std::optional<std::uint64_t> {
    auto it = m.vars.find(std::string(v));
    if (it == m.vars.end()) return std::nullopt;
    return it->second.max;
  };
  std::printf("model: %s (schema %llu)\n", m.model.c_str(), static_cast<unsigned long long>(m.schema_version));
  if (!m.topology.empty()) {
    std::printf("topology:");
    for (const auto& [g, n] : m.topology) std::printf(" %s=%llu", g.c_str(), static_cast<unsigned long long>(n));
    std::printf("\n");
  }
  if (m.cut)
    std::printf("cut: %s stage %llu of %llu\n", m.cut->id.c_str(), static_cast<unsigned long long>(m.cut->stage),
                static_cast<unsigned long long>(m.cut->stages));
  std::printf("vars:\n");
  for (const auto& [n, v] : m.vars) std::printf("  %-20s 1..%llu\n", n.c_str(), static_cast<unsigned long long>(v.max));
  std::printf("states:\n");
  for (const auto& [n, s] : m.states) {
    if (s.host)
      std::printf("  %-20s host %s, %zu dims\n", n.c_str(), std::string(manifest_name(s.host->dtype)).c_str(),
                  s.host->shape.size());
    else if (s.bytes_per_token)
      std::printf("  %-20s paged, %llu bytes per token\n", n.c_str(),
                  static_cast<unsigned long long>(s.bytes_per_token));
    else if (s.bytes_per_seq)
      std::printf("  %-20s per sequence, %llu bytes per slot\n", n.c_str(),
                  static_cast<unsigned long long>(s.bytes_per_seq));
    else
      std::printf("  %-20s fixed, %llu bytes\n", n.c_str(), static_cast<unsigned long long>(s.bytes));
  }
  std::printf("buffers (bytes at var max):\n");
  for (BufferKind k : {BufferKind::Input, BufferKind::Output, BufferKind::Weight, BufferKind::Source, BufferKind::Carry,
                       BufferKind::Workspace, BufferKind::Peer}) {
    std::uint64_t total = 0;
    std::size_t count = 0;
    std::string lines;
    for (const auto& [n, b] : m.buffers) {
      if (b.kind != k) continue;
      const std::uint64_t bytes = shape_elements(b.shape, at_max) * dtype_size(b.dtype);
      total += bytes;
      ++count;
      lines += "    " + n + "  " + std::string(manifest_name(b.dtype)) + " " + dims(b.shape) + "  " +
               std::to_string(bytes) + " B";
      if (b.fill) lines += "  fill " + std::string(to_string(*b.fill));
      if (b.domain && b.domain->index_into)
        lines +=
            "  index_into " + b.domain->index_into->target + " stride " + std::to_string(b.domain->index_into->stride);
      if (b.exported) lines += "  export";
      if (b.placement == Placement::Host) lines += "  host";
      lines += "\n";
    }
    if (!count) continue;
    std::printf("  %s: %s, %llu bytes\n%s", std::string(to_string(k)).c_str(),
                plural(count, "buffer", "buffers").c_str(), static_cast<unsigned long long>(total), lines.c_str());
  }
  std::printf("ops:\n");
  std::map<std::string, std::size_t> per_module;
  for (const auto& [n, op] : m.ops) {
    std::printf("  %-24s %s, %s\n", n.c_str(), plural(op.params.size(), "param", "params").c_str(),
                plural(op.impl.launches.size(), "launch", "launches").c_str());
    for (const auto& l : op.impl.launches) ++per_module[l.is_extern() ? l.entry : l.module];
  }
  std::printf("launches per module:\n");
  for (const auto& [mod, n] : per_module) std::printf("  %-32s %zu\n", mod.c_str(), n);
  std::printf("programs:\n");
  for (const auto& [n, p] : m.programs) {
    std::string shape;
    if (p.batch) {
      shape = "batch groups<=" + std::to_string(p.batch->groups) + " x rows " +
              (p.batch->rows.is_var() ? p.batch->rows.var : std::to_string(p.batch->rows.value));
      if (!p.batch->span.empty()) shape += " span " + p.batch->span;
      if (!p.batch->context.empty()) shape += " context " + p.batch->context;
    } else if (p.once) {
      shape = "once";
    } else if (p.derive) {
      shape = "derive";
    } else {
      shape = "no batch";
    }
    if (p.graph) shape += ", graph";
    std::printf("  %-20s %s, %s\n", n.c_str(), plural(p.calls.size(), "call", "calls").c_str(), shape.c_str());
  }
}

void print_protocol(const Protocol& p) {
  std::printf("serving protocol:\n");
  std::printf("  axes: rows=%s groups=%s", p.row_var().c_str(), p.group_var().c_str());
  if (!p.tray_var().empty()) std::printf(" tray=%s", p.tray_var().c_str());
  if (!p.span_var().empty()) std::printf(" span=%s", p.span_var().c_str());
  if (!p.context_var().empty()) std::printf(" context=%s", p.context_var().c_str());
  std::printf("\n  fills:\n");
  for (const auto& f : p.fills())
    std::printf("    %-10s %s (%s, axis %s, width %llu)\n", std::string(to_string(f.role)).c_str(), f.buffer.c_str(),
                std::string(manifest_name(f.dtype)).c_str(),
                f.axis.empty() ? std::to_string(f.extent).c_str() : f.axis.c_str(),
                static_cast<unsigned long long>(f.width));
  for (const auto& t : p.page_tables())
    std::printf("  page table: %s -> %s, %llu tokens per entry, %llu entries per sequence\n", t.buffer.c_str(),
                t.state.c_str(), static_cast<unsigned long long>(t.stride), static_cast<unsigned long long>(t.width));
  for (const auto& t : p.line_tables())
    std::printf("  line table: %s -> %s, %llu-byte lines, %llu lines per slot\n", t.buffer.c_str(), t.state.c_str(),
                static_cast<unsigned long long>(t.stride), static_cast<unsigned long long>(t.lines_per_slot));
  std::printf("  forwards:\n");
  for (const auto& f : p.forwards()) {
    std::printf(
        "    %-20s groups<=%llu x rows %s", f.program.c_str(), static_cast<unsigned long long>(f.groups),
        f.rows_var.empty() ? std::to_string(f.rows).c_str() : (f.rows_var + "<=" + std::to_string(f.rows)).c_str());
    if (!f.span.empty()) std::printf(", span %s", f.span.c_str());
    if (f.graph) std::printf(", graph");
    if (f.emits_tokens)
      std::printf(", emits %llu token(s) per group%s%s", static_cast<unsigned long long>(f.tokens_per_group),
                  f.count.empty() ? "" : ", count from ", f.count.c_str());
    std::printf("\n");
  }
  auto chunk = p.chunk();
  std::printf("  chunk: %s\n", chunk ? chunk->program.c_str() : "none");
  std::string once, derive;
  for (const auto& n : p.once_programs()) once += " " + n;
  for (const auto& n : p.derive_programs()) derive += " " + n;
  std::printf("  once:%s\n  derive:%s\n", once.empty() ? " none" : once.c_str(),
              derive.empty() ? " none" : derive.c_str());
}

int print_error(const Error& e) {
  std::fflush(stdout);
  if (e.details().empty()) {
    std::fprintf(stderr, "%s\n", e.message().c_str());
  } else {
    for (const auto& line : e.details()) std::fprintf(stderr, "%s\n", line.c_str());
    std::fprintf(stderr, "%s\n", e.message().c_str());
  }
  return 1;
}

Runner setup(CLI::App& app) {
  static Options o;
  auto* sub = app.add_subcommand("verify", "Verify a manifest and print its summary and serving protocol");
  sub->add_option("manifest", o.manifest, "manifest JSON (default: the kern.toml target's manifest)");
  sub->add_option("--target", o.target, "kern.toml target whose manifest to verify");
  return [] {
    std::string path = o.manifest;
    if (path.empty()) {
      Config cfg = load_config(globals().config);
      auto t = cfg.target(o.target);
      if (!t || t->manifest.empty()) {
        std::fprintf(stderr,
                     "usage: kern verify <manifest.json> (no manifest given and no kern.toml target names one)\n");
        return 2;
      }
      path = t->manifest;
    }
    Manifest m;
    try {
      m = parse_manifest_file(path);
    } catch (const Error& e) {
      return print_error(e);
    }
    std::optional<Verified> v;
    try {
      v = verify(std::move(m));
    } catch (const Error& e) {
      return print_error(e);
    }
    bool has_batch = false;
    for (const auto& [n, p] : v->manifest().programs) has_batch |= p.batch.has_value();
    std::optional<Protocol> protocol;
    std::optional<Error> no_protocol;
    try {
      protocol = check_protocol(*v);
    } catch (const Error& e) {
      if (has_batch) return print_error(e);  // a batch program must be servable
      no_protocol = e;
    }
    std::printf("manifest: %s\n", path.c_str());
    print_declarations(v->manifest());
    if (protocol) {
      print_protocol(*protocol);
    } else {
      std::printf("no serving protocol: %s\n", no_protocol->message().c_str());
      for (const auto& line : no_protocol->details()) std::printf("  %s\n", line.c_str());
    }
    std::printf("ok\n");
    return 0;
  };
}

Registrar reg("verify", setup);

}  // namespace
}  // namespace kern::cli::cmd_verify
