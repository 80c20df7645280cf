#include "paged_kv.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kern_gpu_test {

std::string geometry_tag(const AttnGeometry& g) {
  return "H" + std::to_string(g.heads) + " KV" + std::to_string(g.kv_heads) + " hd" + std::to_string(g.head_dim) +
         " P" + std::to_string(g.page_size);
}

std::vector<bf16_bits> uniform_kv(std::mt19937_64& rng, size_t n) { return random_bf16(rng, n, -1.0f, 1.0f); }

std::vector<bf16_bits> fast_kv(std::mt19937_64& rng, size_t n) { return fast_random_bf16(rng(), n); }

std::vector<bf16_bits> fast_random_bf16(uint64_t seed, size_t n) {
  std::vector<bf16_bits> v(n);
  uint64_t x = seed;
  for (size_t i = 0; i < n; i += 4) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (size_t j = 0; j < 4 && i + j < n; ++j)
      v[i + j] = float_to_bf16(static_cast<float>((z >> (16 * j)) & 0xffff) / 32768.0f - 1.0f);
  }
  return v;
}

PagedKv::PagedKv(std::mt19937_64& rng, const AttnGeometry& geo, const std::vector<int>& context, int layers_,
                 int layer_, KvFill fill)
    : g(geo), layers(layers_), layer(layer_) {
  int total_pages = 1;  // one spare page nobody references
  for (int len : context) {
    const int n = (len + g.page_size - 1) / g.page_size;
    max_pages = std::max(max_pages, n);
    total_pages += n;
  }
  block = static_cast<int64_t>(g.page_size) * g.kv_heads * g.head_dim;
  page_stride = static_cast<int64_t>(layers) * 2 * block;
  layer_off = static_cast<int64_t>(layer) * 2 * block;
  data = fill(rng, static_cast<size_t>(total_pages) * page_stride);
  std::vector<int32_t> perm(total_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  table.assign(context.size() * max_pages, 1 << 30);
  int next = 0;
  for (size_t s = 0; s < context.size(); ++s) {
    const int n = (context[s] + g.page_size - 1) / g.page_size;
    for (int i = 0; i < n; ++i) table[s * max_pages + i] = perm[next++];
  }
}

int64_t PagedKv::index(int seq, int token, int kvh, bool v) const {
  const int64_t page = table[static_cast<size_t>(seq) * max_pages + token / g.page_size];
  return page * page_stride + layer_off + (v ? block : 0) +
         (static_cast<int64_t>(token % g.page_size) * g.kv_heads + kvh) * g.head_dim;
}

void PagedKv::row(int seq, int token, int kvh, bool v, double* dst) const {
  const int64_t e = index(seq, token, kvh, v);
  for (int d = 0; d < g.head_dim; ++d) dst[d] = bf16_to_float(data[e + d]);
}

void reference_attention_row(const PagedKv& c, int seq, const bf16_bits* q, int end, double scale, double* out) {
  const AttnGeometry& g = c.g;
  std::vector<double> w(std::max(end, 1));
  for (int h = 0; h < g.heads; ++h) {
    const int kvh = h / g.group();
    double m = -INFINITY;
    for (int t = 0; t < end; ++t) {
      double dot = 0.0;
      for (int d = 0; d < g.head_dim; ++d) dot += bf16_to_float(q[h * g.head_dim + d]) * c.k(seq, t, kvh, d);
      w[t] = dot * scale;
      m = std::max(m, w[t]);
    }
    double den = 0.0;
    for (int t = 0; t < end; ++t) den += (w[t] = std::exp(w[t] - m));
    for (int d = 0; d < g.head_dim; ++d) {
      double acc = 0.0;
      for (int t = 0; t < end; ++t) acc += w[t] * c.v(seq, t, kvh, d);
      out[h * g.head_dim + d] = end > 0 ? acc / den : 0.0;
    }
  }
}

}  // namespace kern_gpu_test
