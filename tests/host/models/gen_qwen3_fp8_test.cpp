// kern gen qwen3 --fp8 (Qwen3GenOptions::fp8): the manifest verifies and serves; one derive program
// quantizes every layer weight from its bf16 source into an e4m3 carry and a 16-byte scale; every layer
// GEMM of prefill and decode is the activation quantization (kernels/quant.cu) followed by
// extern:cublaslt_fp8_tn with both scales; the embedding, lm_head and norms stay the bf16 manifest's
// weights; what fp8 cannot be combined with is refused.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "shell.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/base/sha256.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/core/verify.hpp"
#include "kern/models/qwen3_gen.hpp"
#include "kern/models/qwen3_synth.hpp"

namespace kern::models::fp8_gen_test {
namespace {

using OJ = nlohmann::ordered_json;

Qwen3Shape preset(const std::string& name) { return parse_qwen3_config(qwen3_config_json(qwen3_preset(name))); }

// tiny, the default model (assets/default-model) and the 4B shape.
std::vector<std::pair<std::string, Qwen3Shape>> shapes() {
  return {{"tiny", preset("tiny")},
          {"default-model", read_qwen3_config(std::filesystem::path(KERN_SOURCE_DIR) / "assets" / "default-model")},
          {"4b", preset("4b")}};
}

Qwen3GenOptions fp8_options(bool fp8 = true) {
  Qwen3GenOptions o;
  o.fp8 = fp8;
  for (const std::string& f : qwen3_kernel_families()) o.module_sha256[f] = to_hex(sha256(f));
  o.model = "test";
  return o;
}

core::Manifest parsed(const OJ& m) { return core::parse_manifest(m.dump(), "generated"); }

const std::vector<std::string> kLinear = {"qkv", "o_proj", "gate_up", "down"};
const std::map<std::string, std::string> kGemmLabel = {
    {"qkv", "qkv_proj"}, {"o_proj", "o_proj"}, {"gate_up", "gate_up_proj"}, {"down", "down_proj"}};

std::uint64_t elements(const OJ& buffer) {
  std::uint64_t n = 1;
  for (const auto& d : buffer["shape"]) n *= d.get<std::uint64_t>();
  return n;
}

const OJ& call_named(const OJ& program, const std::string& label) {
  for (const auto& c : program["calls"])
    if (c.value("label", "") == label) return c;
  throw std::runtime_error("no call " + label);
}

// Every call of `program` whose op has an extern launch, with that op's launches' entries.
std::vector<std::pair<const OJ*, std::vector<std::string>>> extern_calls(const OJ& m, const char* program) {
  std::vector<std::pair<const OJ*, std::vector<std::string>>> out;
  for (const auto& c : m["programs"][program]["calls"]) {
    std::vector<std::string> entries;
    bool ext = false;
    for (const auto& l : m["ops"][c["op"].get<std::string>()]["impl"]["launches"]) {
      entries.push_back(l["entry"]);
      ext = ext || l["entry"].get<std::string>().rfind("extern:", 0) == 0;
    }
    if (ext) out.emplace_back(&c, std::move(entries));
  }
  return out;
}

TEST(GenQwen3Fp8, VerifiesServesAndQuantizesEveryLayerWeightInOneDeriveProgram) {
  for (const auto& [name, c] : shapes()) {
    for (std::uint64_t max_seqs : {1, 8, 64, 256}) {
      SCOPED_TRACE(name + " max_seqs " + std::to_string(max_seqs));
      Qwen3GenOptions o = fp8_options();
      o.max_seqs = max_seqs;
      o.batch_invariant = max_seqs != 8;  // fp8 takes cuBLASLt at every step either way
      const OJ m = generate_qwen3_manifest(c, o);
      const core::Verified v = core::verify(parsed(m));
      const core::Protocol protocol = core::check_protocol(v);
      EXPECT_EQ(protocol.derive_programs(), std::vector<std::string>{"quantize"});
      EXPECT_EQ(protocol.once_programs(), std::vector<std::string>{"load"});
      ASSERT_TRUE(protocol.forward(max_seqs, 1).has_value());
      EXPECT_TRUE(protocol.forward(max_seqs, 1)->graph);

      // One derive program; its calls write exactly the fp8 buffers, each from its own bf16 source,
      // over the buffer's whole shape (the verifier does not check the literal rows x cols).
      std::size_t derive = 0;
      for (const auto& [pname, p] : m["programs"].items()) derive += p.value("derive", false) ? 1 : 0;
      EXPECT_EQ(derive, 1u);
      const OJ& q = m["programs"]["quantize"];
      EXPECT_TRUE(q["derive"].get<bool>());
      ASSERT_EQ(q["calls"].size(), 4 * c.layers);
      std::set<std::string> written, fp8_buffers;
      for (const auto& [bname, b] : m["buffers"].items())
        if (b["dtype"] == "fp8e4m3") fp8_buffers.insert(bname);
      for (const auto& call : q["calls"]) {
        EXPECT_EQ(call["op"], "quantize_e4m3");
        const std::string src = call["args"][0]["buf"], scale = call["args"][1]["buf"], w = call["args"][2]["buf"];
        EXPECT_EQ(src, w + "_bf16");
        EXPECT_EQ(scale, w + "_scale");
        EXPECT_EQ(m["buffers"][src]["kind"], "source");
        EXPECT_EQ(m["buffers"][src]["dtype"], "bf16");
        EXPECT_EQ(m["buffers"][w]["kind"], "carry");
        EXPECT_EQ(m["buffers"][w]["dtype"], "fp8e4m3");
        EXPECT_EQ(m["buffers"][w]["shape"], m["buffers"][src]["shape"]);
        EXPECT_EQ(call["args"][3]["i32"].get<std::uint64_t>() * call["args"][4]["i32"].get<std::uint64_t>(),
                  elements(m["buffers"][w]));
        EXPECT_EQ(call["args"][4]["i32"], m["buffers"][w]["shape"][1]);
        written.insert(w);
      }
      EXPECT_EQ(written, fp8_buffers);
      for (std::uint64_t l = 0; l < c.layers; ++l)
        for (const std::string& w : kLinear) {
          const std::string n = "layers." + std::to_string(l) + "." + w;
          EXPECT_TRUE(written.count(n)) << n;
          // The scale: one f32 in 16 bytes (cuBLASLt's and kern's 16-byte rule for fp8 operands).
          EXPECT_EQ(m["buffers"][n + "_scale"]["dtype"], "f32");
          EXPECT_EQ(m["buffers"][n + "_scale"]["kind"], "carry");
          EXPECT_EQ(elements(m["buffers"][n + "_scale"]) * 4, 16u);
          EXPECT_FALSE(m["buffers"][n + "_bf16"]["bind"].empty());
        }

      // Every layer GEMM of both programs: the two quant kernels, then the fp8 GEMM over the quantized
      // input with both scales; only the lm_head stays a bf16 GEMM.
      for (const char* program : {"prefill", "decode"}) {
        SCOPED_TRACE(program);
        std::size_t fp8_calls = 0;
        for (const auto& [callp, entries] : extern_calls(m, program)) {
          const OJ& call = *callp;
          const std::string label = call.value("label", "");
          if (label == "lm_head") {
            EXPECT_EQ(entries, std::vector<std::string>{"extern:cublaslt_bf16_tn"});
            EXPECT_EQ(m["buffers"][call["args"][1]["buf"].get<std::string>()]["dtype"], "bf16");
            continue;
          }
          ++fp8_calls;
          EXPECT_EQ(entries, (std::vector<std::string>{"kern_absmax_partial_bf16", "kern_quant_e4m3_bf16",
                                                       "extern:cublaslt_fp8_tn"}))
              << label;
          const std::string w = call["args"][1]["buf"];
          EXPECT_EQ(m["buffers"][w]["dtype"], "fp8e4m3") << label;
          EXPECT_EQ(call["args"][2]["buf"], w + "_scale") << label;
          const OJ& op = m["ops"][call["op"].get<std::string>()];
          const OJ& gemm = op["impl"]["launches"][2];
          EXPECT_EQ(gemm["args"][0]["scratch"], "x_e4m3");
          EXPECT_EQ(gemm["args"][3]["scratch"], "x_scale");
          EXPECT_EQ(gemm["args"][4]["param"], 2);  // the weight's scale
          EXPECT_EQ(gemm["args"][7]["i32"].get<std::uint64_t>() % 16, 0u);
          EXPECT_EQ(gemm["args"][7]["i32"], m["buffers"][w]["shape"][1]);  // k
          EXPECT_EQ(gemm["args"][6]["i32"], m["buffers"][w]["shape"][0]);  // n
          EXPECT_EQ(op["impl"]["scratch"]["x_scale"]["shape"], OJ::array({4}));
          // The quant kernel reads as many partial maxima as the absmax kernel has blocks.
          const OJ& parts = op["impl"]["launches"][0];
          EXPECT_EQ(op["impl"]["launches"][1]["args"][6]["i32"], parts["grid"][0]);
          EXPECT_EQ(op["impl"]["scratch"]["quant_parts"]["shape"][0], parts["grid"][0]);
          EXPECT_LE(parts["grid"][0].get<std::uint64_t>(), 256u);
          // Decode: cuBLASLt at every step size (no `when`), one algorithm asked for at min(max_seqs, 128).
          for (const auto& l : op["impl"]["launches"]) EXPECT_FALSE(l.contains("when")) << label;
          const bool decode = std::string(program) == "decode";
          EXPECT_EQ(gemm.contains("algo_m"), decode && max_seqs > 128) << label;
          if (gemm.contains("algo_m")) {
            EXPECT_EQ(gemm["algo_m"], 128);
          }
          EXPECT_FALSE(gemm.contains("algo_candidate"));
        }
        EXPECT_EQ(fp8_calls, 4 * c.layers);
        // No bf16 GEMM reads a layer weight, no GEMV: the layers' bf16 weights exist only as sources.
        for (const auto& call : m["programs"][program]["calls"])
          for (const auto& a : call["args"])
            if (a.contains("buf")) {
              EXPECT_NE(m["buffers"][a["buf"].get<std::string>()]["kind"], "source") << call.dump();
            }
      }
      EXPECT_FALSE(m["modules"].contains("gemv"));
      EXPECT_TRUE(m["modules"].contains("quant"));
      EXPECT_FALSE(m["ops"].contains("decode_gate_up_silu"));
      EXPECT_FALSE(m["ops"].contains("decode_o_residual"));

      // The decode program is laid out as prefill: GEMMs into delta, residuals by add_rms_norm.
      const OJ& decode = m["programs"]["decode"];
      EXPECT_EQ(call_named(decode, "layers.0.o_proj")["args"][3]["buf"], "delta");
      EXPECT_EQ(call_named(decode, "layers.0.down_proj")["args"][3]["buf"], "delta");
      EXPECT_EQ(call_named(decode, "layers.0.qkv_proj")["args"][4]["var"], "seqs");
      EXPECT_EQ(call_named(decode, "layers.1.input_norm")["op"], "add_rms_norm");
      EXPECT_EQ(call_named(decode, "final_norm")["op"], "add_rms_norm");
      EXPECT_EQ(call_named(decode, "lm_head")["op"], "decode_lm_head");
      EXPECT_EQ(decode["calls"].size(), m["programs"]["prefill"]["calls"].size() - 1);  // no gather_last

      // Embedding, lm_head and norms: the bf16 manifest's weights, declared and bound alike.
      const OJ plain = generate_qwen3_manifest(c, [&] {
        Qwen3GenOptions b = o;
        b.fp8 = false;
        return b;
      }());
      std::size_t weights = 0;
      for (const auto& [bname, b] : m["buffers"].items()) {
        if (b["kind"] != "weight") continue;
        ++weights;
        EXPECT_EQ(b["dtype"], "bf16") << bname;
        EXPECT_EQ(b, plain["buffers"][bname]) << bname;
      }
      EXPECT_EQ(weights, 3 + 4 * c.layers);  // embed, lm_head, final_norm; per layer 4 norms
      // Sources and weights together bind every tensor the bf16 manifest binds.
      std::set<std::string> bound;
      for (const auto& [bname, b] : m["buffers"].items())
        if (b.contains("bind"))
          for (const auto& s : b["bind"]) bound.insert(s["tensor"].get<std::string>());
      const std::vector<std::string> want = qwen3_bound_tensors(c);
      EXPECT_EQ(bound, std::set<std::string>(want.begin(), want.end()));
    }
  }
}

TEST(GenQwen3Fp8, OffLeavesTheManifestAlone) {
  const Qwen3Shape c = preset("0.6b");
  const OJ m = generate_qwen3_manifest(c, fp8_options(false));
  EXPECT_FALSE(m["programs"].contains("quantize"));
  EXPECT_FALSE(m["modules"].contains("quant"));
  for (const auto& [bname, b] : m["buffers"].items()) {
    EXPECT_NE(b["kind"], "source") << bname;
    EXPECT_NE(b["dtype"], "fp8e4m3") << bname;
  }
}

TEST(GenQwen3Fp8, RefusesWhatItCannotHonour) {
  auto expect_api = [](const Qwen3Shape& c, const Qwen3GenOptions& o, const std::vector<std::string>& needles) {
    try {
      generate_qwen3_manifest(c, o);
      ADD_FAILURE() << "accepted options that should fail with: " << needles.front();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api) << e.what();
      for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  };
  const Qwen3Shape c = preset("4b");
  Qwen3GenOptions o = fp8_options();
  o.decode_chain = true;
  o.batch_invariant = false;
  o.max_seqs = 4;
  expect_api(c, o, {"--fp8", "--decode-chain", "bf16 only"});
  o.batch_invariant = true;  // even where the chain would have been dropped
  o.max_seqs = 64;
  expect_api(c, o, {"--fp8", "--decode-chain"});
  o = fp8_options();
  o.gemv_fused_norm = true;
  expect_api(c, o, {"--fp8", "--gemv-fused-norm"});
  o = fp8_options();
  o.mixed = true;
  o.prefill_logits = false;
  o.max_seqs = 64;
  expect_api(c, o, {"--fp8", "--mixed"});
  // k of every layer GEMM a multiple of 16: the MLP's (intermediate), the attention output's (q width).
  o = fp8_options();
  Qwen3Shape odd = preset("tiny");
  odd.intermediate = 776;  // a multiple of 8 (the GEMV's rule), not of 16
  EXPECT_NO_THROW(generate_qwen3_manifest(odd, fp8_options(false)));
  expect_api(odd, o, {"--fp8", "multiple of 16", "intermediate_size is 776"});
  odd = preset("tiny");
  odd.hidden = 264;
  expect_api(odd, o, {"hidden_size is 264"});
  odd = preset("tiny");
  odd.heads = 6;
  odd.kv_heads = 6;
  odd.head_dim = 64;  // 384: fine
  EXPECT_NO_THROW(generate_qwen3_manifest(odd, o));
}

// kern gen qwen3 --fp8 then kern verify, through the binary; --fp8 --decode-chain exits 1 naming both.
TEST(GenQwen3Fp8Cli, GenThenVerify) {
  const std::string kern = std::string(KERN_BINARY_DIR) + "/bin/kern";
  if (!std::filesystem::exists(kern)) GTEST_SKIP() << kern << " not built";
  const std::filesystem::path root = std::filesystem::temp_directory_path() / "kern_gen_qwen3_fp8_cli";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "kernels");
  for (const std::string& f : qwen3_kernel_families())
    write_file((root / "kernels" / (f + ".fatbin")).string(), "not really a fatbin: " + f);
  const std::string model = std::string(KERN_SOURCE_DIR) + "/assets/default-model";
  const std::string manifest = (root / "fp8.json").string();
  const std::string gen = kern + " gen qwen3 " + model + " --kernels-dir " + (root / "kernels").string() + " --fp8";
  auto [gen_rc, gen_out] = kern_test::run_shell(gen + " -o " + manifest);
  ASSERT_EQ(gen_rc, 0) << gen_out;
  auto [verify_rc, verify_out] = kern_test::run_shell(kern + " verify " + manifest);
  EXPECT_EQ(verify_rc, 0) << verify_out;
  EXPECT_NE(verify_out.find("derive: quantize"), std::string::npos) << verify_out;
  const Json m = parse_json_strict(read_file(manifest));
  EXPECT_EQ(m["modules"]["quant"]["sha256"], to_hex(sha256("not really a fatbin: quant")));
  auto [chain_rc, chain_out] = kern_test::run_shell(gen + " --decode-chain --chain-blocks 132 -o " + manifest);
  EXPECT_EQ(chain_rc, 1) << chain_out;
  EXPECT_NE(chain_out.find("--fp8 cannot be combined with --decode-chain"), std::string::npos) << chain_out;
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace kern::models::fp8_gen_test
