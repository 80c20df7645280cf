// The kernel catalogue's own consistency (the check against the built fatbins needs a GPU:
// tests/gpu/kernels/catalogue_test.cpp), and that kern gen's launches take their module and params
// from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "kern/base/error.hpp"
#include "kern/base/sha256.hpp"
#include "kern/core/manifest.hpp"
#include "kern/models/kernel_catalogue.hpp"
#include "kern/models/qwen3_gen.hpp"

namespace kern::models {
namespace {

TEST(KernelCatalogue, FamiliesSortedEntriesUniqueTypesParse) {
  const auto families = kernel_catalogue();
  ASSERT_FALSE(families.empty());
  std::set<std::string_view> entries;
  for (std::size_t i = 0; i < families.size(); ++i) {
    SCOPED_TRACE(std::string(families[i].name));
    if (i > 0) {
      EXPECT_LT(families[i - 1].name, families[i].name);
    }
    EXPECT_FALSE(families[i].entries.empty());
    for (const KernelEntry& e : families[i].entries) {
      EXPECT_TRUE(entries.insert(e.name).second) << e.name << " listed twice";
      EXPECT_EQ(e.name.rfind("kern_", 0), 0u) << e.name;
      EXPECT_EQ(catalogued_kernel(e.name).family, &families[i]);
      std::set<std::string_view> names;
      for (const KernelParam& p : e.params) {
        EXPECT_TRUE(names.insert(p.name).second) << e.name << ": param " << p.name << " twice";
        const auto t = core::parse_param_type(p.type);
        ASSERT_TRUE(t.has_value()) << e.name << " param " << p.name << ": " << p.type;
        EXPECT_EQ(t->to_string(), p.type) << e.name << " param " << p.name;
      }
    }
  }
  EXPECT_THROW(catalogued_kernel("kern_no_such_kernel"), Error);
  std::vector<std::string> names;
  for (const KernelFamily& f : families) names.emplace_back(f.name);
  EXPECT_EQ(qwen3_kernel_families(), names);
}

// Every kernel launch of generated manifests (each option that changes the launch set) names a
// catalogued entry of its module with the catalogue's params; the decode chain's head passes i64 0
// for the pointers of its absent phases and declares h, which it only reads, an input.
TEST(KernelCatalogue, GeneratedLaunchesFollowIt) {
  Qwen3GenOptions o;
  for (const std::string& f : qwen3_kernel_families()) o.module_sha256[f] = to_hex(sha256(f));
  Qwen3Shape c = qwen3_preset("4b");
  std::set<std::string> launched;
  for (int variant = 0; variant < 8; ++variant) {  // 3: variant 0 with the warp-item decode attention; 4: fp8;
                                                   // 5: tensor-parallel with the peer all-reduce; 6 and 7:
                                                   // variants 3 and 0 with the key-major decode attention
    c.rope_scaling.type = variant == 1 ? Qwen3RopeScaling::Type::Yarn : Qwen3RopeScaling::Type::None;
    c.rope_scaling.original_max_positions = 32768;
    o.decode_chain = variant == 1;
    o.gemv_fused_norm = variant == 2;
    o.batch_invariant = variant == 0 || variant == 3 || variant == 6 || variant == 7;  // 1 and 2 launch the GEMVs and the chain (max_seqs 64)
    o.decode_attn_mma = variant != 2;
    o.decode_attn_items = variant == 3 || variant == 6 ? Qwen3GenOptions::DecodeAttnItems::Warp
                                                       : Qwen3GenOptions::DecodeAttnItems::Block;
    o.decode_attn_key_major = variant == 6 || variant == 7;
    o.sampling = variant != 2;  // argmax in --greedy-only manifests
    o.max_tokens = variant == 0 || variant == 4 ? 8192 : 2048;  // the long-call prefill layouts (mma, wgmma)
    o.fp8 = variant == 4;  // the quant kernels
    o.tp = variant == 5 ? 2 : 1;
    o.tp_peer_allreduce = variant == 5;  // the peer barrier and the one-shot all-reduce
    o.prefill_attn_wgmma = variant != 0;  // variant 0: the mma.sync prefill layouts (--prefill-attn-mma)
    const auto m = generate_qwen3_manifest(c, o);
    for (const auto& [name, decl] : m["ops"].items()) {
      for (const auto& l : decl["impl"]["launches"]) {
        if (!l.contains("module")) continue;  // a runtime extern (cuBLASLt)
        const std::string entry = l["entry"];
        SCOPED_TRACE(name + ": " + entry);
        const CataloguedKernel k = catalogued_kernel(entry);
        EXPECT_EQ(l["module"], std::string(k.family->name));
        std::vector<std::string> params = kernel_param_types(*k.entry);
        if (name == "decode_chain_head") {
          for (std::size_t i : {0, 1, 3, 4, 5, 6}) params[i] = "i64";
          params[2] = "in buffer<bf16>";  // phase D alone only reads h
        }
        EXPECT_EQ(l["params"].get<std::vector<std::string>>(), params);
        EXPECT_EQ(l["args"].size(), params.size());
        launched.insert(entry);
      }
    }
  }
  // Between them the variants launch every production entry of the head dim (hd 64 entries aside).
  for (const KernelFamily& f : kernel_catalogue()) {
    for (const KernelEntry& e : f.entries) {
      if (e.name.find("_hd64") == std::string_view::npos) {
        EXPECT_TRUE(launched.count(std::string(e.name))) << e.name;
      }
    }
  }
}

}  // namespace
}  // namespace kern::models
