// kern bench report: the targets (issues 5, 16 and 18), the table, the JSON document and the peer's JSON.
#include <cmath>
#include <optional>

#include "kern/bench/bench.hpp"
#include "kern/base/error.hpp"
#include "kern/models/qwen3_shape.hpp"

namespace kern::bench {
namespace {

using OJ = nlohmann::ordered_json;

const DecodePoint* decode_at(const std::vector<DecodePoint>& v, std::uint64_t context) {
  for (const DecodePoint& p : v)
    if (p.context == context) return &p;
  return nullptr;
}

const PrefillPoint* prefill_at(const std::vector<PrefillPoint>& v, std::uint64_t tokens, std::uint64_t chunk) {
  for (const PrefillPoint& p : v)
    if (p.tokens == tokens && p.chunk == chunk) return &p;
  return nullptr;
}

Target at_most(std::string name, double measured, double limit, const char* fmt_rule = "<= {:.2f}") {
  return Target{std::move(name), fmt::format(fmt::runtime(fmt_rule), limit), measured, measured <= limit};
}
Target at_least(std::string name, double measured, double limit, const char* fmt_rule = ">= {:.2f}") {
  return Target{std::move(name), fmt::format(fmt::runtime(fmt_rule), limit), measured, measured >= limit};
}

std::string gib(std::uint64_t bytes) { return fmt::format("{:.3f} GB", static_cast<double>(bytes) / 1e9); }

double get_number(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) fail(ErrorKind::Api, "{}: '{}' must be a number", where, key);
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0)
    fail(ErrorKind::Api, "{}: '{}' = {} is not a finite non-negative number", where, key, v);
  return v;
}

std::uint64_t get_count(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() == 0)
    fail(ErrorKind::Api, "{}: '{}' must be a positive integer", where, key);
  return it->get<std::uint64_t>();
}

OJ per_op_json(const std::vector<OpShare>& ops) {
  OJ out = OJ::array();
  for (const OpShare& o : ops) out.push_back({{"op", o.op}, {"calls", o.calls}, {"us", o.us}, {"share", o.share}});
  return out;
}

}  // namespace

Peer parse_peer_json(const std::string& text, const std::string& what) {
  const Json j = parse_json_strict(text, {ErrorKind::Api, what});
  if (!j.is_object()) fail(ErrorKind::Api, "{}: the peer's report must be a JSON object", what);
  Peer p;
  p.ran = true;
  if (auto it = j.find("device"); it != j.end() && it->is_string()) p.note = it->get<std::string>();
  if (auto it = j.find("torch"); it != j.end() && it->is_string())
    p.note += (p.note.empty() ? "" : ", torch ") + it->get<std::string>();
  for (const char* key : {"decode", "prefill"})
    if (!j.contains(key) || !j[key].is_array()) fail(ErrorKind::Api, "{}: '{}' must be a list", what, key);
  for (std::size_t i = 0; i < j["decode"].size(); ++i) {
    const Json& d = j["decode"][i];
    const std::string where = fmt::format("{}: decode[{}]", what, i);
    if (!d.is_object()) fail(ErrorKind::Api, "{} must be an object", where);
    DecodePoint dp;
    dp.context = get_count(d, "context", where);
    dp.gpu_step_us = get_number(d, "gpu_step_us", where);
    if (d.contains("e2e_us")) dp.e2e_us = get_number(d, "e2e_us", where);
    if (d.contains("replays")) dp.replays = get_count(d, "replays", where);
    p.decode.push_back(dp);
  }
  for (std::size_t i = 0; i < j["prefill"].size(); ++i) {
    const Json& d = j["prefill"][i];
    const std::string where = fmt::format("{}: prefill[{}]", what, i);
    if (!d.is_object()) fail(ErrorKind::Api, "{} must be an object", where);
    PrefillPoint pp;
    pp.tokens = get_count(d, "tokens", where);
    pp.chunk = get_count(d, "chunk", where);
    pp.ms = get_number(d, "ms", where);
    pp.tokens_per_s = get_number(d, "tokens_per_s", where);
    p.prefill.push_back(pp);
  }
  return p;
}

namespace {

// Issue 18's targets (round two; they replace issue 5's, which were looser: 32k ≤ 1.25, 2 × the old,
// weaker peer at decode, 1.1 × at prefill, prefill ≥ 60k / 45k tok/s). The issue names the 4B shape's
// figures and a decode limit for the 0.6B and 8B shapes; a shape that is no preset is held to the
// 4B shape's list, any other preset to the shape-free rules (the peer ratios, the host loop, start-up).
struct ShapeRules {
  std::optional<double> decode_1k;  // decode step at 1k / floor
  bool four_b = false;               // the 4B shape's own: 32k, the prefill rates
};

ShapeRules shape_rules(const std::optional<std::string>& preset) {
  if (!preset || *preset == "4b") return {1.20, true};
  if (*preset == "0.6b") return {1.60, false};
  if (*preset == "8b") return {1.20, false};
  return {};
}

}  // namespace

std::string targets_heading(const Report& r) {
  const std::optional<std::string> preset = models::qwen3_preset_name(r.shape);
  return fmt::format("targets (issues 5, 16 and 18; {})",
                     !preset ? "a shape that is no preset: the 4B shape's" : fmt::format("the {} shape", *preset));
}

std::vector<Target> evaluate_targets(const Report& r) {
  std::vector<Target> t;
  const ShapeRules rules = shape_rules(models::qwen3_preset_name(r.shape));
  if (const DecodePoint* d = decode_at(r.decode, 1024); d && rules.decode_1k)
    t.push_back(at_most("decode step at 1k / floor", d->ratio, *rules.decode_1k));
  if (const DecodePoint* d = decode_at(r.decode, 32768); d && rules.four_b)
    t.push_back(at_most("decode step at 32k / floor (KV bytes included)", d->ratio, 1.20));
  for (const DecodePoint& d : r.decode)
    if (d.e2e_us > 0)
      t.push_back(at_most(fmt::format("end-to-end minus GPU step at {} (us)", d.context), d.e2e_us - d.gpu_step_us,
                          30.0, "<= {:.0f}"));
  if (const PrefillPoint* p = prefill_at(r.prefill, 2048, 2048); p && rules.four_b)
    t.push_back(at_least("prefill 2048 tokens (tok/s)", p->tokens_per_s, 65000, ">= {:.0f}"));
  if (const PrefillPoint* p = prefill_at(r.prefill, 8192, 8192); p && rules.four_b)
    t.push_back(at_least("prefill 8192 tokens (tok/s)", p->tokens_per_s, 60000, ">= {:.0f}"));
  if (r.startup.measured)
    t.push_back(at_most("start-up to first token (s)", r.startup.first_token_ms / 1e3, 3.0, "<= {:.1f}"));
  if (r.peer.ran) {
    for (const DecodePoint& d : r.decode)
      if (const DecodePoint* q = decode_at(r.peer.decode, d.context); q && d.gpu_step_us > 0)
        t.push_back(at_least(fmt::format("decode at {}: peer step / kern step", d.context),
                             q->gpu_step_us / d.gpu_step_us, 1.5));
    for (const PrefillPoint& p : r.prefill)
      if (const PrefillPoint* q = prefill_at(r.peer.prefill, p.tokens, p.chunk);
          q && q->tokens_per_s > 0 && p.chunk == p.tokens)
        t.push_back(at_least(fmt::format("prefill {}: kern tok/s / peer tok/s", p.tokens),
                             p.tokens_per_s / q->tokens_per_s, 1.2));
  }
  pool_targets(r.pool, t);
  return t;
}

std::string format_table(const Report& r) {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  auto op_lines = [&](const std::vector<OpShare>& ops) {
    line(fmt::format("  {:<22} {:>6} {:>12} {:>8}", "op", "calls", "us", "share"));
    for (const OpShare& o : ops)
      line(fmt::format("  {:<22} {:>6} {:>12.1f} {:>7.1f}%", o.op, o.calls, o.us, 100 * o.share));
  };
  line(fmt::format("kern bench — {} — {} — {}", r.model, r.machine, r.date));
  line(fmt::format("shape: hidden {}, intermediate {}, {} layers, {}/{} heads × {}, vocab {}, {} embeddings",
                   r.shape.hidden, r.shape.intermediate, r.shape.layers, r.shape.heads, r.shape.kv_heads,
                   r.shape.head_dim, r.shape.vocab, r.shape.tied ? "tied" : "untied"));
  line("");
  line("ceilings");
  line(fmt::format("  device-to-device copy  {} copied, {:.3f} ms  -> {:.0f} GB/s (read + written)",
                   gib(r.ceilings.copy_bytes), r.ceilings.copy_ms, r.ceilings.copy_gbps));
  line(fmt::format("  bf16 GEMM {}x{}x{}   {:.3f} ms  -> {:.1f} TFLOP/s", r.ceilings.gemm_m, r.ceilings.gemm_n,
                   r.ceilings.gemm_k, r.ceilings.gemm_ms, r.ceilings.gemm_tflops));
  for (const auto& [name, c] : {std::pair{"host -> device", &r.ceilings.h2d}, std::pair{"device -> host", &r.ceilings.d2h}})
    if (c->bytes > 0)
      line(fmt::format("  pinned {}  {} copied, {:.3f} ms  -> {:.1f} GB/s", name, gib(c->bytes), c->ms, c->gbps));
  line("");
  line("decode (batch 1; GPU step = median graph replay; e2e = host loop per token)");
  line(fmt::format("  {:>8} {:>12} {:>12} {:>12} {:>12} {:>10} {:>8} {:>12}", "context", "GPU step us", "e2e us",
                   "bytes/step", "floor us", "step/floor", "replays", "peer x"));
  for (const DecodePoint& d : r.decode) {
    std::string peer = "-";
    if (const DecodePoint* q = decode_at(r.peer.decode, d.context); q && d.gpu_step_us > 0)
      peer = fmt::format("{:.2f}", q->gpu_step_us / d.gpu_step_us);
    line(fmt::format("  {:>8} {:>12.1f} {:>12.1f} {:>12} {:>12.1f} {:>10.3f} {:>8} {:>12}", d.context, d.gpu_step_us,
                     d.e2e_us, gib(d.bytes), d.floor_us, d.ratio, d.replays, peer));
  }
  line("");
  if (!r.batched.empty()) {
    line("decode at batch B (every sequence at one context; GPU step = median graph replay; call = the serve "
         "runner's decode call: inputs, replay, readback)");
    line(fmt::format("  {:>6} {:>8} {:>7} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}", "batch", "context", "bucket",
                     "GPU step us", "call us", "bytes/step", "floor us", "step/floor", "tok/s"));
    for (const BatchedPoint& b : r.batched)
      line(fmt::format("  {:>6} {:>8} {:>7} {:>12.1f} {:>12.1f} {:>12} {:>12.1f} {:>10.3f} {:>10.0f}", b.batch,
                       b.context, b.bucket, b.gpu_step_us, b.call_us, gib(b.bytes), b.floor_us, b.ratio,
                       b.tokens_per_s));
    for (const BatchedPoint& b : r.batched)
      if (!b.ops.empty()) {
        line(fmt::format("per-op time of one decode step at batch {}, context {} (eager, events around each call)",
                         b.batch, b.context));
        op_lines(b.ops);
      }
    line("");
  }
  line("prefill (time to the first token; model FLOPs / measured GEMM rate)");
  line(fmt::format("  {:>8} {:>8} {:>12} {:>12} {:>10} {:>10} {:>12}", "tokens", "chunk", "ms", "tok/s", "TFLOP/s",
                   "of GEMM", "peer x"));
  for (const PrefillPoint& p : r.prefill) {
    std::string peer = "-";
    if (const PrefillPoint* q = prefill_at(r.peer.prefill, p.tokens, p.chunk); q && q->tokens_per_s > 0)
      peer = fmt::format("{:.2f}", p.tokens_per_s / q->tokens_per_s);
    line(fmt::format("  {:>8} {:>8} {:>12.2f} {:>12.0f} {:>10.1f} {:>9.1f}% {:>12}", p.tokens, p.chunk, p.ms,
                     p.tokens_per_s, p.tflops, 100 * p.gemm_fraction, peer));
  }
  line("");
  if (const auto& tp = r.tensor_parallel) {
    line(fmt::format("tensor parallel: {} ranks in this process on GPUs {}; all-reduce: {}", tp->ranks, tp->gpus,
                     tp->allreduce));
    line(fmt::format("  decode at {}: e2e {:.1f} us per token{}", tp->context, tp->decode_e2e_us,
                     tp->one_rank_e2e_us > 0 ? fmt::format(" (one GPU: {:.1f} us, {:.2f}x)", tp->one_rank_e2e_us,
                                                           tp->one_rank_e2e_us / tp->decode_e2e_us)
                                             : std::string()));
    for (const PrefillPoint& p : tp->prefill) {
      std::string one = "";
      if (const PrefillPoint* q = prefill_at(r.prefill, p.tokens, p.chunk); q && q->tokens_per_s > 0)
        one = fmt::format(" (one GPU: {:.0f} tok/s, {:.2f}x)", q->tokens_per_s, p.tokens_per_s / q->tokens_per_s);
      line(fmt::format("  prefill {} tokens: {:.2f} ms, {:.0f} tok/s{}", p.tokens, p.ms, p.tokens_per_s, one));
    }
    line("");
  }
  line("start-up");
  if (r.startup.measured)
    line(fmt::format(
        "  process start -> first token {:.0f} ms (warm page cache); weights {} in {:.0f} ms -> {:.2f} GB/s",
        r.startup.first_token_ms, gib(r.startup.weight_bytes), r.startup.weight_ms, r.startup.weight_gbps));
  else
    line(fmt::format("  not measured: {}", r.startup.note));
  line("");
  if (!r.ops.empty()) {
    line(fmt::format("per-op time of one decode step at context {} (eager, events around each call)", r.op_context));
    op_lines(r.ops);
    line("");
  }
  for (const PrefillOps& p : r.prefill_ops) {
    line(
        fmt::format("per-op time of one prefill of {} tokens (eager, events around each call; the prefill program's "
                    "call over {} rows)",
                    p.tokens, p.rows));
    op_lines(p.ops);
    line("");
  }
  s += format_pool(r.pool);
  line("");
  line(r.peer.ran ? fmt::format("PyTorch peer: {} (\"peer x\" = how many times faster kern is)", r.peer.note)
                  : fmt::format("PyTorch peer: not run ({})", r.peer.note));
  line("");
  const std::vector<Target> targets = evaluate_targets(r);
  if (!targets.empty()) {
    line(targets_heading(r));
    for (const Target& t : targets)
      line(fmt::format("  {:<52} {:>12.3f}  {:<10} {}", t.name, t.measured, t.rule, t.pass ? "PASS" : "MISS"));
  }
  return s;
}

nlohmann::ordered_json to_json(const Report& r) {
  OJ j;
  j["format"] = "kern-bench-1";
  j["date"] = r.date;
  j["machine"] = r.machine;
  j["command"] = r.command;
  j["model"] = r.model;
  j["shape"] = {{"hidden", r.shape.hidden},     {"intermediate", r.shape.intermediate},
                {"layers", r.shape.layers},     {"heads", r.shape.heads},
                {"kv_heads", r.shape.kv_heads}, {"head_dim", r.shape.head_dim},
                {"vocab", r.shape.vocab},       {"tied", r.shape.tied}};
  j["ceilings"] = {{"copy_bytes", r.ceilings.copy_bytes},
                   {"copy_ms", r.ceilings.copy_ms},
                   {"copy_gbps", r.ceilings.copy_gbps},
                   {"gemm_shape", OJ::array({r.ceilings.gemm_m, r.ceilings.gemm_n, r.ceilings.gemm_k})},
                   {"gemm_ms", r.ceilings.gemm_ms},
                   {"gemm_tflops", r.ceilings.gemm_tflops}};
  if (r.ceilings.h2d.bytes > 0)
    for (const auto& [key, c] : {std::pair{"h2d", &r.ceilings.h2d}, std::pair{"d2h", &r.ceilings.d2h}}) {
      j["ceilings"][fmt::format("pinned_{}_bytes", key)] = c->bytes;
      j["ceilings"][fmt::format("pinned_{}_ms", key)] = c->ms;
      j["ceilings"][fmt::format("pinned_{}_gbps", key)] = c->gbps;
    }
  OJ decode = OJ::array();
  for (const DecodePoint& d : r.decode)
    decode.push_back({{"context", d.context},
                      {"replays", d.replays},
                      {"gpu_step_us", d.gpu_step_us},
                      {"e2e_us", d.e2e_us},
                      {"weight_bytes", d.weight_bytes},
                      {"kv_bytes", d.kv_bytes},
                      {"bytes", d.bytes},
                      {"floor_us", d.floor_us},
                      {"ratio_to_floor", d.ratio}});
  j["decode"] = std::move(decode);
  if (!r.batched.empty()) {
    OJ batched = OJ::array();
    for (const BatchedPoint& b : r.batched)
      batched.push_back({{"batch", b.batch},
                         {"context", b.context},
                         {"bucket", b.bucket},
                         {"gpu_step_us", b.gpu_step_us},
                         {"call_us", b.call_us},
                         {"bytes", b.bytes},
                         {"floor_us", b.floor_us},
                         {"ratio_to_floor", b.ratio},
                         {"tokens_per_s", b.tokens_per_s},
                         {"per_op", per_op_json(b.ops)}});
    j["batched"] = std::move(batched);
  }
  OJ prefill = OJ::array();
  for (const PrefillPoint& p : r.prefill)
    prefill.push_back({{"tokens", p.tokens},
                       {"chunk", p.chunk},
                       {"ms", p.ms},
                       {"tokens_per_s", p.tokens_per_s},
                       {"flops", p.flops},
                       {"tflops", p.tflops},
                       {"gemm_fraction", p.gemm_fraction}});
  j["prefill"] = std::move(prefill);
  j["startup"] = {{"measured", r.startup.measured},
                  {"note", r.startup.note},
                  {"first_token_ms", r.startup.first_token_ms},
                  {"weight_bytes", r.startup.weight_bytes},
                  {"weight_ms", r.startup.weight_ms},
                  {"weight_gbps", r.startup.weight_gbps}};
  j["ops"] = {{"context", r.op_context}, {"per_op", per_op_json(r.ops)}};
  if (!r.prefill_ops.empty()) {
    OJ prefill_ops = OJ::array();
    for (const PrefillOps& p : r.prefill_ops)
      prefill_ops.push_back({{"tokens", p.tokens}, {"rows", p.rows}, {"per_op", per_op_json(p.ops)}});
    j["prefill_ops"] = std::move(prefill_ops);
  }
  j["pool"] = pool_json(r.pool);
  if (const auto& tp = r.tensor_parallel) {
    OJ pre = OJ::array();
    for (const PrefillPoint& p : tp->prefill)
      pre.push_back({{"tokens", p.tokens}, {"chunk", p.chunk}, {"ms", p.ms}, {"tokens_per_s", p.tokens_per_s}});
    j["tensor_parallel"] = {{"ranks", tp->ranks},
                            {"gpus", tp->gpus},
                            {"allreduce", tp->allreduce},
                            {"context", tp->context},
                            {"decode_e2e_us", tp->decode_e2e_us},
                            {"one_rank_e2e_us", tp->one_rank_e2e_us},
                            {"prefill", std::move(pre)}};
  }
  OJ peer;
  peer["ran"] = r.peer.ran;
  peer["note"] = r.peer.note;
  OJ pd = OJ::array(), pp = OJ::array();
  for (const DecodePoint& q : r.peer.decode) {
    OJ e = {{"context", q.context}, {"gpu_step_us", q.gpu_step_us}, {"e2e_us", q.e2e_us}};
    if (const DecodePoint* d = decode_at(r.decode, q.context); d && d->gpu_step_us > 0)
      e["kern_speedup"] = q.gpu_step_us / d->gpu_step_us;
    pd.push_back(std::move(e));
  }
  for (const PrefillPoint& q : r.peer.prefill) {
    OJ e = {{"tokens", q.tokens}, {"chunk", q.chunk}, {"ms", q.ms}, {"tokens_per_s", q.tokens_per_s}};
    if (const PrefillPoint* p = prefill_at(r.prefill, q.tokens, q.chunk); p && q.tokens_per_s > 0)
      e["kern_speedup"] = p->tokens_per_s / q.tokens_per_s;
    pp.push_back(std::move(e));
  }
  peer["decode"] = std::move(pd);
  peer["prefill"] = std::move(pp);
  j["peer"] = std::move(peer);
  OJ targets = OJ::array();
  for (const Target& t : evaluate_targets(r))
    targets.push_back({{"name", t.name}, {"rule", t.rule}, {"measured", t.measured}, {"pass", t.pass}});
  j["targets"] = std::move(targets);
  return j;
}

}  // namespace kern::bench
