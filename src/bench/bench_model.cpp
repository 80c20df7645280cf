// kern bench arithmetic: bytes per decode step, prefill FLOPs, medians, floors and ratios.
#include <algorithm>
#include <map>

#include "kern/bench/bench.hpp"
#include "kern/base/error.hpp"

namespace kern::bench {
namespace {

constexpr std::uint64_t kBf16 = 2;

// Elements of one layer's four matrices (q/k/v, o, gate/up, down).
std::uint64_t layer_matrix_elems(const models::Qwen3Shape& s) {
  const std::uint64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  return (q + 2 * kv) * s.hidden + s.hidden * q + 2 * s.intermediate * s.hidden + s.hidden * s.intermediate;
}

// Elements of one layer's norm weights (input, post-attention, q and k norms).
std::uint64_t layer_norm_elems(const models::Qwen3Shape& s) { return 2 * s.hidden + 2 * s.head_dim; }

void require_samples(const std::vector<double>& v, const char* what) {
  if (v.empty()) fail(ErrorKind::Api, "bench: no {} samples", what);
}

}  // namespace

std::uint64_t kv_bytes_per_token(const models::Qwen3Shape& s) { return s.layers * 2 * s.kv_heads * s.head_dim * kBf16; }

std::uint64_t decode_weight_bytes(const models::Qwen3Shape& s, std::uint64_t matrix_bytes) {
  if (matrix_bytes == 0) fail(ErrorKind::Api, "bench: layer matrices of 0 bytes per element");
  const std::uint64_t bf16_elems = s.layers * layer_norm_elems(s) + s.hidden /* final norm */ +
                                   s.vocab * s.hidden /* lm_head */ + s.hidden /* one embedding row */;
  return s.layers * layer_matrix_elems(s) * matrix_bytes + bf16_elems * kBf16;
}

std::uint64_t decode_kv_bytes(const models::Qwen3Shape& s, std::uint64_t context) {
  return context * kv_bytes_per_token(s);
}

double prefill_flops(const models::Qwen3Shape& s, std::uint64_t tokens) {
  const double n = static_cast<double>(tokens);
  const double linear = 2.0 * n * static_cast<double>(s.layers * layer_matrix_elems(s));
  // Row i attends to i + 1 positions: QKᵀ and PV are 2 · head_dim FLOPs per (head, key) each.
  const double pairs = n * (n + 1) / 2;
  const double attention = 4.0 * static_cast<double>(s.layers * s.heads * s.head_dim) * pairs;
  const double lm_head = 2.0 * static_cast<double>(s.vocab * s.hidden);
  return linear + attention + lm_head;
}

double gemm_flops(std::uint64_t m, std::uint64_t n, std::uint64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

double median(std::vector<double> v) {
  if (v.empty()) fail(ErrorKind::Api, "median of no samples");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Ceilings make_ceilings(std::uint64_t copy_bytes, double copy_ms, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                       double gemm_ms) {
  if (copy_bytes == 0 || copy_ms <= 0) fail(ErrorKind::Api, "bench: copy ceiling needs bytes and a positive time");
  if (m == 0 || n == 0 || k == 0 || gemm_ms <= 0)
    fail(ErrorKind::Api, "bench: GEMM ceiling needs a shape and a positive time");
  Ceilings c;
  c.copy_bytes = copy_bytes;
  c.copy_ms = copy_ms;
  c.copy_gbps = 2.0 * static_cast<double>(copy_bytes) / (copy_ms * 1e-3) / 1e9;
  c.gemm_m = m;
  c.gemm_n = n;
  c.gemm_k = k;
  c.gemm_ms = gemm_ms;
  c.gemm_tflops = gemm_flops(m, n, k) / (gemm_ms * 1e-3) / 1e12;
  return c;
}

DecodePoint make_decode_point(const models::Qwen3Shape& s, std::uint64_t context, const std::vector<double>& step_ms,
                              const std::vector<double>& e2e_ms, double copy_gbps, std::uint64_t matrix_bytes) {
  require_samples(step_ms, "decode step");
  if (copy_gbps <= 0) fail(ErrorKind::Api, "bench: the floor needs a positive copy bandwidth");
  DecodePoint p;
  p.context = context;
  p.replays = step_ms.size();
  p.gpu_step_us = median(step_ms) * 1e3;
  p.e2e_us = e2e_ms.empty() ? 0 : median(e2e_ms) * 1e3;
  p.weight_bytes = decode_weight_bytes(s, matrix_bytes);
  p.kv_bytes = decode_kv_bytes(s, context);
  p.bytes = p.weight_bytes + p.kv_bytes;
  p.floor_us = static_cast<double>(p.bytes) / (copy_gbps * 1e9) * 1e6;
  p.ratio = p.gpu_step_us / p.floor_us;
  return p;
}

BatchedPoint make_batched_point(const models::Qwen3Shape& s, std::uint64_t batch, std::uint64_t context,
                                std::uint64_t bucket, const std::vector<double>& step_ms,
                                const std::vector<double>& call_ms, double copy_gbps, std::uint64_t matrix_bytes) {
  require_samples(step_ms, "batched decode step");
  require_samples(call_ms, "batched decode call");
  if (copy_gbps <= 0) fail(ErrorKind::Api, "bench: the floor needs a positive copy bandwidth");
  if (batch == 0 || context == 0) fail(ErrorKind::Api, "bench: a batched decode of {} x {} tokens", batch, context);
  BatchedPoint p;
  p.batch = batch;
  p.context = context;
  p.bucket = bucket;
  p.gpu_step_us = median(step_ms) * 1e3;
  p.call_us = median(call_ms) * 1e3;
  p.bytes = decode_weight_bytes(s, matrix_bytes) + batch * decode_kv_bytes(s, context);
  p.floor_us = static_cast<double>(p.bytes) / (copy_gbps * 1e9) * 1e6;
  p.ratio = p.gpu_step_us / p.floor_us;
  p.tokens_per_s = p.call_us > 0 ? static_cast<double>(batch) / (p.call_us * 1e-6) : 0;
  return p;
}

PrefillPoint make_prefill_point(const models::Qwen3Shape& s, std::uint64_t tokens, std::uint64_t chunk,
                                const std::vector<double>& ms, double gemm_tflops) {
  require_samples(ms, "prefill");
  PrefillPoint p;
  p.tokens = tokens;
  p.chunk = chunk;
  p.ms = median(ms);
  if (p.ms <= 0) fail(ErrorKind::Api, "bench: prefill of {} tokens took no time", tokens);
  p.tokens_per_s = static_cast<double>(tokens) / (p.ms * 1e-3);
  p.flops = prefill_flops(s, tokens);
  p.tflops = p.flops / (p.ms * 1e-3) / 1e12;
  p.gemm_fraction = gemm_tflops > 0 ? p.tflops / gemm_tflops : 0;
  return p;
}

std::vector<OpShare> op_shares(const std::vector<std::pair<std::string, double>>& call_ms) {
  std::map<std::string, OpShare> by_op;
  double total = 0;
  for (const auto& [op, ms] : call_ms) {
    OpShare& o = by_op[op];
    o.op = op;
    o.calls += 1;
    o.us += ms * 1e3;
    total += ms * 1e3;
  }
  std::vector<OpShare> out;
  for (auto& [name, o] : by_op) {
    o.share = total > 0 ? o.us / total : 0;
    out.push_back(o);
  }
  std::stable_sort(out.begin(), out.end(), [](const OpShare& a, const OpShare& b) { return a.us > b.us; });
  return out;
}

std::vector<std::uint64_t> parse_sizes(const std::string& text, const std::string& what) {
  std::vector<std::uint64_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    std::uint64_t v = 0;
    bool ok = !item.empty() && item.size() <= 18;
    for (char ch : item) {
      if (ch < '0' || ch > '9') {
        ok = false;
        break;
      }
      v = v * 10 + static_cast<std::uint64_t>(ch - '0');
    }
    if (!ok || v == 0) fail(ErrorKind::Api, "{}: '{}' is not a positive integer (give a,b,c)", what, item);
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

}  // namespace kern::bench
