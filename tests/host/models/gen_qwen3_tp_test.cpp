// kern gen qwen3 --tp (Qwen3GenOptions::tp): one SPMD manifest over topology group `tp` that verifies and
// serves; each rank binds its rows of q/k/v_proj and gate/up_proj and its columns of o_proj and down_proj
// (checked byte for byte through the weight binder's plan for each rank, and by the sum over ranks of the
// split layer equalling the whole layer in float64); each o_proj and down_proj is followed by an
// all-reduce of `delta` over the group; what cannot be split or combined is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <tuple>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "kern/base/error.hpp"
#include "kern/base/json.hpp"
#include "kern/base/sha256.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/core/verify.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/models/qwen3_synth.hpp"
#include "kern/weights/bind_plan.hpp"
#include "kern/weights/tensors.hpp"

namespace kern::models::tp_gen_test {
namespace {

using OJ = nlohmann::ordered_json;

Qwen3Shape preset(const std::string& name) { return parse_qwen3_config(qwen3_config_json(qwen3_preset(name))); }

Qwen3GenOptions options(std::uint64_t tp) {
  Qwen3GenOptions o;
  o.tp = tp;
  for (const std::string& f : qwen3_kernel_families()) o.module_sha256[f] = to_hex(sha256(f));
  o.model = "test";
  return o;
}

core::Manifest parsed(const OJ& m) { return core::parse_manifest(m.dump(), "generated"); }

std::vector<std::string> labels(const OJ& program) {
  std::vector<std::string> out;
  for (const auto& c : program["calls"]) out.push_back(c.value("label", ""));
  return out;
}

TEST(GenQwen3Tp, VerifiesAndServesAsOneSpmdManifestWithTwoAllReducesPerLayer) {
  const std::vector<std::pair<std::string, Qwen3Shape>> shapes = {
      {"tiny", preset("tiny")},
      {"default-model", read_qwen3_config(std::filesystem::path(KERN_SOURCE_DIR) / "assets" / "default-model")},
      {"4b", preset("4b")},
      {"8b", preset("8b")}};
  for (const auto& [name, c] : shapes) {
    for (const std::uint64_t tp : {2, 4}) {
      if (c.kv_heads % tp != 0) continue;  // the default model has 2 kv heads
      SCOPED_TRACE(name + " tp " + std::to_string(tp));
      Qwen3GenOptions o = options(tp);
      o.tp_peer_allreduce_rows = 0;  // NCCL for every call size
      const OJ m = generate_qwen3_manifest(c, o);
      const core::Verified v = core::verify(parsed(m));  // throws with every violation
      const core::Protocol p = core::check_protocol(v);
      EXPECT_EQ(m["topology"], (OJ{{"groups", {{"tp", tp}}}}));
      EXPECT_EQ(m["states"]["kv"]["bytes_per_token"].get<std::uint64_t>(),
                c.layers * 2 * (c.kv_heads / tp) * c.head_dim * 2);
      EXPECT_EQ(m["buffers"]["attn"]["shape"][1].get<std::uint64_t>(), c.heads / tp * c.head_dim);
      EXPECT_EQ(m["buffers"]["act"]["shape"][1].get<std::uint64_t>(), c.intermediate / tp);
      EXPECT_EQ(m["buffers"]["hidden"]["shape"][1].get<std::uint64_t>(), c.hidden);  // the residual is whole
      EXPECT_EQ(m["buffers"]["lm_head"]["shape"], OJ::array({c.vocab, c.hidden}));
      // The all-reduce op: NCCL over the tp group, in place.
      const OJ& ar = m["ops"]["allreduce"]["impl"]["launches"][0];
      EXPECT_EQ(ar["entry"], "extern:nccl_allreduce_bf16");
      EXPECT_EQ(ar["args"][0], ar["args"][1]);
      EXPECT_EQ(ar["args"][3], (OJ{{"rank", "tp"}}));
      for (const char* program : {"prefill", "decode"}) {
        SCOPED_TRACE(program);
        const std::vector<std::string> ls = labels(m["programs"][program]);
        std::size_t reduces = 0;
        for (std::size_t i = 0; i < ls.size(); ++i) {
          for (const char* after : {"o_proj", "down_proj"}) {
            const std::string suffix = std::string(".") + after;
            if (ls[i].size() > suffix.size() && ls[i].compare(ls[i].size() - suffix.size(), suffix.size(), suffix) == 0) {
              ASSERT_LT(i + 1, ls.size());
              const std::string layer = ls[i].substr(0, ls[i].size() - suffix.size());
              EXPECT_EQ(ls[i + 1], layer + (after == std::string("o_proj") ? ".o_allreduce" : ".down_allreduce"));
              const OJ& c_ar = m["programs"][program]["calls"][i + 1];
              EXPECT_EQ(c_ar["op"], "allreduce");
              EXPECT_EQ(c_ar["args"][0], (OJ{{"buf", "delta"}}));
              EXPECT_EQ(c_ar["args"][1], (OJ{{"expr", {{"mul", OJ::array({"tokens", c.hidden})}}}}));
              // ... and the next call adds delta to the residual.
              ASSERT_LT(i + 2, ls.size());
              const OJ& next = m["programs"][program]["calls"][i + 2];
              EXPECT_EQ(next["op"], "add_rms_norm") << ls[i + 2];
              ++reduces;
            }
          }
        }
        EXPECT_EQ(reduces, 2 * c.layers);
        // Decode is laid out as prefill: no accumulating GEMM anywhere.
        for (const auto& call : m["programs"][program]["calls"])
          for (const auto& l : m["ops"][call["op"].get<std::string>()]["impl"]["launches"])
            EXPECT_EQ(l["entry"].get<std::string>().find("_acc"), std::string::npos) << call.value("label", "");
      }
      ASSERT_TRUE(p.chunk());
      EXPECT_TRUE(p.chunk()->emits_tokens);  // kern run's prefill still yields the first token
    }
  }
}

TEST(GenQwen3Tp, ThePeerAllReduceSumsExportedPartsBetweenTwoBarriers) {
  const Qwen3Shape c = preset("tiny");
  Qwen3GenOptions o = options(2);
  o.tp_peer_allreduce = true;
  const OJ m = generate_qwen3_manifest(c, o);
  const core::Verified v = core::verify(parsed(m));
  core::check_protocol(v);
  EXPECT_FALSE(m["ops"].contains("allreduce"));  // no NCCL
  EXPECT_TRUE(m["buffers"]["tp_parts"]["export"].get<bool>());
  EXPECT_EQ(m["buffers"]["tp_part_peers"]["of"], "tp_parts");
  EXPECT_EQ(m["buffers"]["tp_flag_peers"]["of"], "tp_flags");
  const OJ& b = m["ops"]["peer_barrier"]["impl"]["launches"][0];
  EXPECT_EQ(b["entry"], "kern_peer_barrier");
  EXPECT_EQ(b["args"][1], (OJ{{"rank", "tp"}}));
  EXPECT_EQ(b["args"][5], (OJ{{"i64", 2000000000}}));
  // The barriers' words are the protocol's error fill: every driver fails a call that had one time out.
  EXPECT_EQ(m["buffers"]["tp_barrier_errors"]["fill"], "error");
  EXPECT_EQ(core::check_protocol(v).fill(core::Fill::Error)->buffer, "tp_barrier_errors");
  for (const char* program : {"prefill", "decode"}) {
    SCOPED_TRACE(program);
    const OJ& calls = m["programs"][program]["calls"];
    std::set<std::uint64_t> error_words;
    std::size_t reduces = 0;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const std::string label = calls[i].value("label", "");
      if (calls[i]["op"] == "peer_barrier") {
        EXPECT_TRUE(error_words.insert(calls[i]["args"][2].value("offset", 0)).second) << label;
        continue;
      }
      for (const std::string what : {"o", "down"}) {
        const std::string gemm = what == "o" ? ".o_proj" : ".down_proj";
        if (label.size() <= gemm.size() || label.compare(label.size() - gemm.size(), gemm.size(), gemm) != 0) continue;
        const std::string layer = label.substr(0, label.size() - gemm.size());
        ASSERT_LT(i + 4, calls.size());
        EXPECT_EQ(calls[i]["args"][2], (OJ{{"buf", "tp_parts"}})) << label;  // the partial sum, exported
        EXPECT_EQ(calls[i + 1]["label"], layer + "." + what + "_barrier_in");
        EXPECT_EQ(calls[i + 2]["label"], layer + "." + what + "_allreduce");
        EXPECT_EQ(calls[i + 2]["op"], "allreduce_peer");
        EXPECT_EQ(calls[i + 2]["args"][1], (OJ{{"buf", "delta"}}));
        EXPECT_EQ(calls[i + 3]["label"], layer + "." + what + "_barrier_out");
        EXPECT_EQ(calls[i + 4]["op"], "add_rms_norm");
        ++reduces;
      }
    }
    EXPECT_EQ(reduces, 2 * c.layers);
    EXPECT_EQ(error_words.size(), 4 * c.layers);  // every barrier its own word of tp_barrier_errors
    EXPECT_EQ(*error_words.rbegin(), 4 * (4 * c.layers - 1));
  }
}

// The default: decode-sized calls (up to max_seqs rows) through the peer kernel, larger ones through NCCL
// out of place from the same exported parts, each launch chosen by `when` on tokens.
TEST(GenQwen3Tp, TheDefaultAllReducesDecodeSizedCallsThroughPeersAndLargerOnesThroughNccl) {
  const Qwen3Shape c = preset("tiny");
  Qwen3GenOptions o = options(2);
  o.max_seqs = 16;
  o.max_tokens = 512;
  const OJ m = generate_qwen3_manifest(c, o);
  const core::Verified v = core::verify(parsed(m));
  core::check_protocol(v);
  EXPECT_FALSE(m["ops"].contains("allreduce"));
  const OJ small{{"var", "tokens"}, {"max", 16}};
  EXPECT_EQ(m["ops"]["peer_barrier"]["impl"]["launches"][0]["when"], small);
  const OJ& peer = m["ops"]["allreduce_peer"]["impl"]["launches"];
  ASSERT_EQ(peer.size(), 1u);
  EXPECT_EQ(peer[0]["entry"], "kern_allreduce_peer_bf16");
  EXPECT_EQ(peer[0]["when"], small);
  const OJ& nccl = m["ops"]["allreduce_nccl"]["impl"]["launches"];
  ASSERT_EQ(nccl.size(), 1u);
  EXPECT_EQ(nccl[0]["entry"], "extern:nccl_allreduce_bf16");
  EXPECT_EQ(nccl[0]["when"], (OJ{{"var", "tokens"}, {"min", 17}}));
  EXPECT_EQ(nccl[0]["args"], (OJ::array({OJ{{"param", 0}}, OJ{{"param", 1}}, OJ{{"param", 2}}, OJ{{"rank", "tp"}}})));
  for (const char* program : {"prefill", "decode"}) {
    SCOPED_TRACE(program);
    const OJ& calls = m["programs"][program]["calls"];
    std::size_t reduces = 0;
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (calls[i]["op"] == "allreduce_peer") {
        ASSERT_LT(i + 3, calls.size());
        EXPECT_EQ(calls[i + 1]["op"], "peer_barrier");
        EXPECT_EQ(calls[i + 2]["op"], "allreduce_nccl");  // NCCL's send: this rank's parts, out of place
        EXPECT_EQ(calls[i + 2]["args"], (OJ::array({OJ{{"buf", "tp_parts"}}, OJ{{"buf", "delta"}}, calls[i]["args"][2]})));
        EXPECT_EQ(calls[i + 3]["op"], "add_rms_norm");
        ++reduces;
      }
    EXPECT_EQ(reduces, 2 * c.layers);
  }

  // Rows at or past max_tokens: the peer kernel for every call, no `when`, no NCCL.
  o.tp_peer_allreduce_rows = 4096;
  const OJ all = generate_qwen3_manifest(c, o);
  core::verify(parsed(all));
  EXPECT_FALSE(all["ops"].contains("allreduce_nccl"));
  EXPECT_FALSE(all["ops"]["allreduce_peer"]["impl"]["launches"][0].contains("when"));
  EXPECT_FALSE(all["ops"]["peer_barrier"]["impl"]["launches"][0].contains("when"));
  o.tp_peer_allreduce_rows.reset();
  o.tp_peer_allreduce = true;
  EXPECT_EQ(generate_qwen3_manifest(c, o)["ops"], all["ops"]);
}

TEST(GenQwen3Tp, OneRankIsTheManifestWithoutTopology) {
  const Qwen3Shape c = preset("tiny");
  const OJ one = generate_qwen3_manifest(c, options(1));
  EXPECT_FALSE(one.contains("topology"));
  EXPECT_FALSE(one["ops"].contains("allreduce"));
  Qwen3GenOptions plain = options(1);
  EXPECT_EQ(one.dump(), generate_qwen3_manifest(c, plain).dump());
}

TEST(GenQwen3Tp, RefusesWhatItCannotSplitOrCombine) {
  auto message = [](const Qwen3Shape& c, const Qwen3GenOptions& o) -> std::string {
    try {
      generate_qwen3_manifest(c, o);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api) << e.what();
      return e.what();
    }
    return "";
  };
  const Qwen3Shape tiny = preset("tiny");  // 4 heads, 2 kv heads, intermediate 768
  EXPECT_NE(message(tiny, options(0)).find("--tp must be in [1, 8], got 0"), std::string::npos);
  EXPECT_NE(message(tiny, options(16)).find("--tp must be in [1, 8], got 16"), std::string::npos);
  EXPECT_NE(message(tiny, options(4)).find("num_key_value_heads is 2"), std::string::npos);
  EXPECT_NE(message(tiny, options(3)).find("num_attention_heads is 4"), std::string::npos);
  Qwen3Shape odd = tiny;
  odd.intermediate = 769;
  EXPECT_NE(message(odd, options(2)).find("intermediate_size is 769"), std::string::npos);
  const std::vector<std::pair<std::function<void(Qwen3GenOptions&)>, std::string>> combos = {
      {[](Qwen3GenOptions& o) { o.decode_chain = true; }, "--decode-chain"},
      {[](Qwen3GenOptions& o) { o.fp8 = true; }, "--fp8"},
      {[](Qwen3GenOptions& o) { o.gemv_fused_norm = true; }, "--gemv-fused-norm"},
      {[](Qwen3GenOptions& o) {
         o.mixed = true;
         o.prefill_logits = false;
         o.max_seqs = 16;
       },
       "--mixed"}};
  for (const auto& [change, what] : combos) {
    Qwen3GenOptions o = options(2);
    change(o);
    EXPECT_NE(message(tiny, o).find("cannot be combined with " + what), std::string::npos) << what;
  }
  Qwen3GenOptions both = options(2);
  both.tp_peer_allreduce = true;
  both.tp_peer_allreduce_rows = 8;
  EXPECT_NE(message(tiny, both).find("exclude each other"), std::string::npos);
  Qwen3GenOptions one = options(1);
  one.tp_peer_allreduce_rows = 8;
  EXPECT_NE(message(tiny, one).find("need --tp above 1"), std::string::npos);
  one.tp_peer_allreduce_rows.reset();
  one.tp_peer_allreduce = true;
  EXPECT_NE(message(tiny, one).find("need --tp above 1"), std::string::npos);
}

// ---- the split, through the weight binder

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}
double from_bf16(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A [rows, cols] bf16 matrix read from bytes.
struct Matrix {
  std::uint64_t rows = 0, cols = 0;
  std::vector<double> v;
  double at(std::uint64_t r, std::uint64_t c) const { return v[r * cols + c]; }
};
Matrix matrix(const std::vector<std::byte>& bytes, std::uint64_t rows, std::uint64_t cols) {
  EXPECT_EQ(bytes.size(), rows * cols * 2);
  Matrix m{rows, cols, std::vector<double>(rows * cols)};
  for (std::uint64_t i = 0; i < rows * cols; ++i) m.v[i] = from_bf16(bytes.data() + 2 * i);
  return m;
}

// y = W·x
std::vector<double> mat_vec(const Matrix& w, const std::vector<double>& x) {
  EXPECT_EQ(x.size(), w.cols);
  std::vector<double> y(w.rows, 0.0);
  for (std::uint64_t r = 0; r < w.rows; ++r)
    for (std::uint64_t c = 0; c < w.cols; ++c) y[r] += w.at(r, c) * x[c];
  return y;
}

struct Checkpoint {
  weights::HostTensors tensors;
  std::map<std::string, Matrix> full;
};

// Random bf16 tensors for layer 0's linear weights of shape c.
Checkpoint layer0(const Qwen3Shape& c) {
  Checkpoint ck;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const std::uint64_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  const std::vector<std::tuple<std::string, std::uint64_t, std::uint64_t>> ws = {
      {"self_attn.q_proj", q, c.hidden},          {"self_attn.k_proj", kv, c.hidden},
      {"self_attn.v_proj", kv, c.hidden},         {"self_attn.o_proj", c.hidden, q},
      {"mlp.gate_proj", c.intermediate, c.hidden}, {"mlp.up_proj", c.intermediate, c.hidden},
      {"mlp.down_proj", c.hidden, c.intermediate}};
  for (const auto& [w, rows, cols] : ws) {
    std::vector<std::byte> bytes(rows * cols * 2);
    for (std::uint64_t i = 0; i < rows * cols; ++i) {
      const std::uint16_t h = to_bf16(dist(rng));
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    ck.full[w] = matrix(bytes, rows, cols);
    ck.tensors.add("model.layers.0." + w + ".weight", DType::BF16, {rows, cols}, std::move(bytes));
  }
  return ck;
}

// Rank `rank`'s bytes of weight buffer `name` of manifest m.
Matrix bound(const core::Manifest& m, const weights::Tensors& t, const std::string& name, std::uint32_t rank) {
  const core::Buffer& b = m.buffers.at(name);
  const std::uint64_t rows = b.shape.at(0).value, cols = b.shape.at(1).value;
  const weights::BindPlan plan = weights::plan_bind(name, b, rows * cols * 2, t, {{"tp", rank}});
  std::vector<std::byte> bytes(rows * cols * 2);
  weights::execute_bind_plan_on_host(plan, t, bytes);
  return matrix(bytes, rows, cols);
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

TEST(GenQwen3Tp, EachRankBindsItsSliceAndTheRanksSumToTheWholeLayer) {
  for (const std::string shape : {"tiny", "0.6b"}) {
    const Qwen3Shape c = preset(shape);
    for (const std::uint32_t tp : {2u, 4u}) {
      if (c.kv_heads % tp != 0) continue;
      SCOPED_TRACE(shape + " tp " + std::to_string(tp));
      const core::Manifest m = parsed(generate_qwen3_manifest(c, options(tp)));
      const Checkpoint ck = layer0(c);
      const std::uint64_t ql = c.heads / tp * c.head_dim, kvl = c.kv_heads / tp * c.head_dim;
      const std::uint64_t il = c.intermediate / tp;
      std::mt19937 rng(11);
      std::normal_distribution<double> dist(0.0, 1.0);
      std::vector<double> x(c.hidden), a(c.heads * c.head_dim);
      for (double& e : x) e = dist(rng);
      for (double& e : a) e = dist(rng);
      std::vector<double> o_sum(c.hidden, 0.0), mlp_sum(c.hidden, 0.0);
      for (std::uint32_t r = 0; r < tp; ++r) {
        const Matrix qkv = bound(m, ck.tensors, "layers.0.qkv", r);
        const Matrix o = bound(m, ck.tensors, "layers.0.o_proj", r);
        const Matrix gu = bound(m, ck.tensors, "layers.0.gate_up", r);
        const Matrix down = bound(m, ck.tensors, "layers.0.down", r);
        ASSERT_EQ(qkv.rows, ql + 2 * kvl);
        // qkv: rank r's q heads, then its k heads, then its v heads, byte for byte.
        for (std::uint64_t i = 0; i < qkv.rows; ++i)
          for (std::uint64_t k = 0; k < c.hidden; ++k) {
            const double want = i < ql         ? ck.full.at("self_attn.q_proj").at(r * ql + i, k)
                                : i < ql + kvl ? ck.full.at("self_attn.k_proj").at(r * kvl + i - ql, k)
                                               : ck.full.at("self_attn.v_proj").at(r * kvl + i - ql - kvl, k);
            ASSERT_EQ(qkv.at(i, k), want) << "qkv row " << i << " col " << k;
          }
        for (std::uint64_t i = 0; i < 2 * il; ++i)
          for (std::uint64_t k = 0; k < c.hidden; ++k)
            ASSERT_EQ(gu.at(i, k), ck.full.at(i < il ? "mlp.gate_proj" : "mlp.up_proj").at(r * il + i % il, k));
        // o_proj over rank r's slice of the attention output (its heads' columns), summed over ranks.
        const std::vector<double> a_r(a.begin() + r * ql, a.begin() + (r + 1) * ql);
        const std::vector<double> o_r = mat_vec(o, a_r);
        // The MLP on rank r's intermediate columns.
        const std::vector<double> g = mat_vec(gu, x);
        std::vector<double> act(il);
        for (std::uint64_t i = 0; i < il; ++i) act[i] = silu(g[i]) * g[il + i];
        const std::vector<double> d_r = mat_vec(down, act);
        for (std::uint64_t h = 0; h < c.hidden; ++h) {
          o_sum[h] += o_r[h];
          mlp_sum[h] += d_r[h];
        }
      }
      const std::vector<double> o_full = mat_vec(ck.full.at("self_attn.o_proj"), a);
      const std::vector<double> g_full = mat_vec(ck.full.at("mlp.gate_proj"), x);
      const std::vector<double> u_full = mat_vec(ck.full.at("mlp.up_proj"), x);
      std::vector<double> act_full(c.intermediate);
      for (std::uint64_t i = 0; i < c.intermediate; ++i) act_full[i] = silu(g_full[i]) * u_full[i];
      const std::vector<double> mlp_full = mat_vec(ck.full.at("mlp.down_proj"), act_full);
      for (std::uint64_t h = 0; h < c.hidden; ++h) {
        EXPECT_NEAR(o_sum[h], o_full[h], 1e-9 * (1 + std::abs(o_full[h]))) << h;
        EXPECT_NEAR(mlp_sum[h], mlp_full[h], 1e-9 * (1 + std::abs(mlp_full[h]))) << h;
      }
    }
  }
}

}  // namespace
}  // namespace kern::models::tp_gen_test
