// The synthesized weights make a usable model: a float reference forward of Qwen3 over the
// tiny preset (all 4 layers) keeps activations sane and gives logits that are neither flat
// nor a copy of the input, with clear top-1/top-2 margins (the HF gate needs > 0.2 nat).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/models/qwen3_synth.hpp"

namespace kern::models {
namespace {

namespace fs = std::filesystem;

using Vec = std::vector<float>;

struct Checkpoint {
  std::string dir;
  Json index;
  Vec tensor(const std::string& name) const {
    std::string shard = dir + "/" + index["weight_map"][name].get<std::string>();
    File f(shard);
    std::uint64_t n = 0;
    f.read_exact(&n, 8, 0);
    std::string json(n, '\0');
    f.read_exact(json.data(), n, 8);
    Json h = parse_json_strict(json);
    std::uint64_t a = h[name]["data_offsets"][0], b = h[name]["data_offsets"][1];
    std::vector<std::uint16_t> raw((b - a) / 2);
    f.read_exact(raw.data(), b - a, 8 + n + a);
    Vec out(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
      std::uint32_t u = std::uint32_t{raw[i]} << 16;
      std::memcpy(&out[i], &u, 4);
    }
    return out;
  }
};

Vec matvec(const Vec& w, const Vec& x, std::size_t rows) {  // w: [rows, x.size()]
  const std::size_t cols = x.size();
  Vec y(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    double s = 0;
    const float* row = &w[r * cols];
    for (std::size_t c = 0; c < cols; ++c) s += static_cast<double>(row[c]) * x[c];
    y[r] = static_cast<float>(s);
  }
  return y;
}

void rmsnorm(float* x, std::size_t n, const float* w) {
  double ss = 0;
  for (std::size_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6));
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] * inv * w[i];
}

float rms(const Vec& x) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  return static_cast<float>(std::sqrt(ss / static_cast<double>(x.size())));
}

void rope(float* v, std::size_t hd, std::size_t pos) {  // NeoX halves
  for (std::size_t i = 0; i < hd / 2; ++i) {
    double freq = std::pow(1e6, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    double ang = static_cast<double>(pos) * freq;
    float c = static_cast<float>(std::cos(ang)), s = static_cast<float>(std::sin(ang));
    float a = v[i], b = v[i + hd / 2];
    v[i] = a * c - b * s;
    v[i + hd / 2] = b * c + a * s;
  }
}

TEST(Qwen3SynthForward, TinyModelHasSaneActivationsAndDecisiveLogits) {
  std::string t = (fs::temp_directory_path() / "kern-synth-fwd-XXXXXX").string();
  fs::path tmp = ::mkdtemp(t.data());
  SynthOptions o;
  o.shape = qwen3_preset("tiny");
  o.out_dir = (tmp / "ckpt").string();
  o.seed = 11;
  synth_qwen3(o);
  Checkpoint ck{o.out_dir, parse_json_strict(read_file(o.out_dir + "/model.safetensors.index.json"))};
  const auto& s = o.shape;
  const std::size_t H = s.hidden, hd = s.head_dim, nh = s.heads, nkv = s.kv_heads, I = s.intermediate, V = s.vocab;

  const Vec embed = ck.tensor("model.embed_tokens.weight");
  const std::size_t T = 20;
  std::vector<std::size_t> tokens;
  std::uint64_t st = 12345;
  for (std::size_t i = 0; i < T; ++i)
    tokens.push_back((st = st * 6364136223846793005ull + 1442695040888963407ull) % 150000);

  std::vector<Vec> x(T);
  for (std::size_t p = 0; p < T; ++p)
    x[p].assign(embed.begin() + static_cast<std::ptrdiff_t>(tokens[p] * H),
                embed.begin() + static_cast<std::ptrdiff_t>((tokens[p] + 1) * H));
  const float embed_rms = rms(x[0]);
  for (std::size_t l = 0; l < s.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    Vec in_norm = ck.tensor(p + "input_layernorm.weight"), post_norm = ck.tensor(p + "post_attention_layernorm.weight");
    Vec wq = ck.tensor(p + "self_attn.q_proj.weight"), wk = ck.tensor(p + "self_attn.k_proj.weight");
    Vec wv = ck.tensor(p + "self_attn.v_proj.weight"), wo = ck.tensor(p + "self_attn.o_proj.weight");
    Vec qn = ck.tensor(p + "self_attn.q_norm.weight"), kn = ck.tensor(p + "self_attn.k_norm.weight");
    Vec wg = ck.tensor(p + "mlp.gate_proj.weight"), wu = ck.tensor(p + "mlp.up_proj.weight"),
        wd = ck.tensor(p + "mlp.down_proj.weight");
    std::vector<Vec> q(T), k(T), v(T);
    for (std::size_t t2 = 0; t2 < T; ++t2) {
      Vec h = x[t2];
      rmsnorm(h.data(), H, in_norm.data());
      q[t2] = matvec(wq, h, nh * hd);
      k[t2] = matvec(wk, h, nkv * hd);
      v[t2] = matvec(wv, h, nkv * hd);
      for (std::size_t i = 0; i < nh; ++i) rmsnorm(&q[t2][i * hd], hd, qn.data()), rope(&q[t2][i * hd], hd, t2);
      for (std::size_t i = 0; i < nkv; ++i) rmsnorm(&k[t2][i * hd], hd, kn.data()), rope(&k[t2][i * hd], hd, t2);
    }
    for (std::size_t t2 = 0; t2 < T; ++t2) {
      Vec att(nh * hd, 0.0f);
      for (std::size_t i = 0; i < nh; ++i) {
        std::size_t g = i / (nh / nkv);
        std::vector<double> sc(t2 + 1);
        double mx = -1e30;
        for (std::size_t j = 0; j <= t2; ++j) {
          double d = 0;
          for (std::size_t e = 0; e < hd; ++e) d += static_cast<double>(q[t2][i * hd + e]) * k[j][g * hd + e];
          sc[j] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[j]);
        }
        double z = 0;
        for (auto& e : sc) z += (e = std::exp(e - mx));
        for (std::size_t j = 0; j <= t2; ++j)
          for (std::size_t e = 0; e < hd; ++e) att[i * hd + e] += static_cast<float>(sc[j] / z) * v[j][g * hd + e];
      }
      Vec o2 = matvec(wo, att, H);
      for (std::size_t e = 0; e < H; ++e) x[t2][e] += o2[e];
      Vec h = x[t2];
      rmsnorm(h.data(), H, post_norm.data());
      Vec gate = matvec(wg, h, I), up = matvec(wu, h, I);
      for (std::size_t e = 0; e < I; ++e) gate[e] = gate[e] / (1.0f + std::exp(-gate[e])) * up[e];
      Vec d = matvec(wd, gate, H);
      for (std::size_t e = 0; e < H; ++e) x[t2][e] += d[e];
    }
  }
  const Vec final_norm = ck.tensor("model.norm.weight");
  int decisive = 0, copies = 0;
  double worst_std = 1e9, best_std = 0;
  for (std::size_t p = 0; p < T; ++p) {
    float r = rms(x[p]);
    EXPECT_TRUE(std::isfinite(r));
    EXPECT_LT(r, 50 * embed_rms) << "residual stream blew up at position " << p;
    EXPECT_GT(r, 0.5 * embed_rms);
    Vec n = x[p];
    rmsnorm(n.data(), H, final_norm.data());
    Vec logits = matvec(embed, n, V);
    double mean = 0, sq = 0;
    for (float l : logits) mean += l;
    mean /= static_cast<double>(V);
    for (float l : logits) sq += (l - mean) * (l - mean);
    double sd = std::sqrt(sq / static_cast<double>(V));
    worst_std = std::min(worst_std, sd);
    best_std = std::max(best_std, sd);
    std::size_t arg = static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (arg == tokens[p]) ++copies;
    std::partial_sort(logits.begin(), logits.begin() + 2, logits.end(), std::greater<>());
    if (logits[0] - logits[1] > 0.2) ++decisive;
  }
  fs::remove_all(tmp);
  RecordProperty("decisive_positions", decisive);
  RecordProperty("copy_positions", copies);
  std::printf("decisive (margin > 0.2 nat): %d/%zu, argmax = input token: %d/%zu, logit std %.2f..%.2f\n", decisive, T,
              copies, T, worst_std, best_std);
  EXPECT_GT(worst_std, 0.5);  // not flat
  EXPECT_LT(best_std, 20.0);  // not saturated
  EXPECT_GE(decisive, static_cast<int>(T) / 2);
  EXPECT_LE(copies, static_cast<int>(T) * 3 / 4);
}

}  // namespace
}  // namespace kern::models
