// The synthesized weights make a usable model: a float reference forward of Qwen3 over the
// tiny preset (all 4 layers) keeps activations sane and gives logits that are neither flat
// nor a copy of the input, with clear top-1/top-2 margins (the HF gate needs > 0.2 nat). The same
// forward with bf16 rounding bounds what tensor parallelism's split projections alone change.
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

// Rounds to bf16, nearest even.
float bf16_round(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// How the reference forward rounds: not at all (float), or to bf16 wherever kern's kernels store a
// bf16 tensor, with o_proj and down_proj computed as `parts` partial sums over contiguous column
// ranges (tensor-parallel ranks), each rounded to bf16, added in f32 and rounded once more.
struct Rounding {
  bool bf16 = false;
  int parts = 1;
};

struct Forward {
  std::vector<Vec> residual;  // each position's residual stream after the last layer
  std::vector<Vec> logits;
};

// A float reference forward of Qwen3 over `tokens` (causal attention over all of them).
Forward forward(const Checkpoint& ck, const Qwen3Shape& s, const std::vector<std::size_t>& tokens, Rounding rnd) {
  const std::size_t H = s.hidden, hd = s.head_dim, nh = s.heads, nkv = s.kv_heads, I = s.intermediate, V = s.vocab;
  const std::size_t T = tokens.size();
  auto rd = [&](Vec& v) {
    if (rnd.bf16)
      for (float& e : v) e = bf16_round(e);
  };
  // w [rows, in.size()] · in, as rnd.parts partial sums over contiguous column ranges.
  auto project = [&](const Vec& w, const Vec& in, std::size_t rows) {
    const std::size_t cols = in.size(), pc = cols / static_cast<std::size_t>(rnd.parts);
    Vec acc(rows, 0.0f);
    for (std::size_t r = 0; r < static_cast<std::size_t>(rnd.parts); ++r) {
      Vec part(rows);
      for (std::size_t o = 0; o < rows; ++o) {
        double sum = 0;
        for (std::size_t c = r * pc; c < (r + 1) * pc; ++c) sum += static_cast<double>(w[o * cols + c]) * in[c];
        part[o] = static_cast<float>(sum);
      }
      if (rnd.parts > 1) rd(part);
      for (std::size_t o = 0; o < rows; ++o) acc[o] += part[o];
    }
    rd(acc);
    return acc;
  };
  const Vec embed = ck.tensor("model.embed_tokens.weight");
  std::vector<Vec> x(T);
  for (std::size_t p = 0; p < T; ++p)
    x[p].assign(embed.begin() + static_cast<std::ptrdiff_t>(tokens[p] * H),
                embed.begin() + static_cast<std::ptrdiff_t>((tokens[p] + 1) * H));
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
      rd(h);
      q[t2] = matvec(wq, h, nh * hd);
      k[t2] = matvec(wk, h, nkv * hd);
      v[t2] = matvec(wv, h, nkv * hd);
      rd(v[t2]);
      for (std::size_t i = 0; i < nh; ++i) rmsnorm(&q[t2][i * hd], hd, qn.data()), rope(&q[t2][i * hd], hd, t2);
      for (std::size_t i = 0; i < nkv; ++i) rmsnorm(&k[t2][i * hd], hd, kn.data()), rope(&k[t2][i * hd], hd, t2);
      rd(q[t2]);
      rd(k[t2]);
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
      rd(att);
      Vec o2 = project(wo, att, H);
      for (std::size_t e = 0; e < H; ++e) x[t2][e] += o2[e];
      rd(x[t2]);
      Vec h = x[t2];
      rmsnorm(h.data(), H, post_norm.data());
      rd(h);
      Vec gate = matvec(wg, h, I), up = matvec(wu, h, I);
      rd(gate);
      rd(up);
      for (std::size_t e = 0; e < I; ++e) gate[e] = gate[e] / (1.0f + std::exp(-gate[e])) * up[e];
      rd(gate);
      Vec d = project(wd, gate, H);
      for (std::size_t e = 0; e < H; ++e) x[t2][e] += d[e];
      rd(x[t2]);
    }
  }
  const Vec final_norm = ck.tensor("model.norm.weight");
  Forward f;
  f.residual = x;
  for (std::size_t p = 0; p < T; ++p) {
    Vec n = x[p];
    rmsnorm(n.data(), H, final_norm.data());
    rd(n);
    f.logits.push_back(matvec(embed, n, V));
    rd(f.logits.back());
  }
  return f;
}

std::vector<std::size_t> random_tokens(std::size_t n, std::uint64_t state) {
  std::vector<std::size_t> tokens;
  for (std::size_t i = 0; i < n; ++i)
    tokens.push_back((state = state * 6364136223846793005ull + 1442695040888963407ull) % 150000);
  return tokens;
}

struct TinyCheckpoint {
  explicit TinyCheckpoint(std::uint64_t seed) {
    std::string t = (fs::temp_directory_path() / "kern-synth-fwd-XXXXXX").string();
    tmp = ::mkdtemp(t.data());
    o.shape = qwen3_preset("tiny");
    o.out_dir = (tmp / "ckpt").string();
    o.seed = seed;
    synth_qwen3(o);
    ck = Checkpoint{o.out_dir, parse_json_strict(read_file(o.out_dir + "/model.safetensors.index.json"))};
  }
  ~TinyCheckpoint() { fs::remove_all(tmp); }
  fs::path tmp;
  SynthOptions o;
  Checkpoint ck;
};

TEST(Qwen3SynthForward, TinyModelHasSaneActivationsAndDecisiveLogits) {
  const TinyCheckpoint tiny(11);
  const std::size_t T = 20;
  const std::vector<std::size_t> tokens = random_tokens(T, 12345);
  const Forward f = forward(tiny.ck, tiny.o.shape, tokens, Rounding{});
  const Vec embed = tiny.ck.tensor("model.embed_tokens.weight");
  const float embed_rms = rms(Vec(embed.begin() + static_cast<std::ptrdiff_t>(tokens[0] * tiny.o.shape.hidden),
                                  embed.begin() + static_cast<std::ptrdiff_t>((tokens[0] + 1) * tiny.o.shape.hidden)));
  const std::size_t V = tiny.o.shape.vocab;
  int decisive = 0, copies = 0;
  double worst_std = 1e9, best_std = 0;
  for (std::size_t p = 0; p < T; ++p) {
    float r = rms(f.residual[p]);
    EXPECT_TRUE(std::isfinite(r));
    EXPECT_LT(r, 50 * embed_rms) << "residual stream blew up at position " << p;
    EXPECT_GT(r, 0.5 * embed_rms);
    Vec logits = f.logits[p];
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
  RecordProperty("decisive_positions", decisive);
  RecordProperty("copy_positions", copies);
  std::printf("decisive (margin > 0.2 nat): %d/%zu, argmax = input token: %d/%zu, logit std %.2f..%.2f\n", decisive, T,
              copies, T, worst_std, best_std);
  EXPECT_GT(worst_std, 0.5);  // not flat
  EXPECT_LT(best_std, 20.0);  // not saturated
  EXPECT_GE(decisive, static_cast<int>(T) / 2);
  EXPECT_LE(copies, static_cast<int>(T) * 3 / 4);
}

// What tensor parallelism's arithmetic alone does to the tiny model (the checkpoint of
// tests/gpu/serve/tp_gpu_test.cpp, synthesized with seed 7): with bf16 rounding where kern rounds, splitting o_proj and down_proj
// into two rounded partial sums moves the logits by rounding-sized amounts only. The GPU test's tolerance
// rests on this; a TP run that differs by much more is computing something else.
TEST(Qwen3SynthForward, SplittingTheRowParallelProjectionsMovesLogitsOnlyByRounding) {
  const TinyCheckpoint tiny(7);
  const std::vector<std::size_t> tokens = random_tokens(24, 3);
  const Forward whole = forward(tiny.ck, tiny.o.shape, tokens, Rounding{true, 1});
  const Forward split = forward(tiny.ck, tiny.o.shape, tokens, Rounding{true, 2});
  auto log_softmax_at = [](const Vec& v, std::size_t k) {
    const double mx = *std::max_element(v.begin(), v.end());
    double z = 0;
    for (float e : v) z += std::exp(static_cast<double>(e) - mx);
    return static_cast<double>(v[k]) - mx - std::log(z);
  };
  double sum = 0, mx = 0, dlogp = 0;
  std::size_t n = 0;
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    const Vec& a = whole.logits[p];
    const Vec& b = split.logits[p];
    const std::size_t top = static_cast<std::size_t>(std::max_element(a.begin(), a.end()) - a.begin());
    dlogp += std::abs(log_softmax_at(a, top) - log_softmax_at(b, top));
    for (std::size_t k = 0; k < a.size(); ++k) {
      const double d = std::abs(static_cast<double>(a[k]) - b[k]);
      sum += d;
      mx = std::max(mx, d);
      ++n;
    }
  }
  std::printf("[tp-rounding] whole vs two parts: |dlogit| mean %.4f max %.4f; |dlogp(top)| mean %.4f\n",
              sum / static_cast<double>(n), mx, dlogp / static_cast<double>(tokens.size()));
  EXPECT_LT(sum / static_cast<double>(n), 0.06);
  EXPECT_LT(mx, 0.5);
  EXPECT_LT(dlogp / static_cast<double>(tokens.size()), 0.06);
  // And the split is not a no-op: the rounding of the parts shows.
  EXPECT_GT(sum, 0.0);
}

}  // namespace
}  // namespace kern::models
