// Timings of the kernels at serving sizes (Qwen3-4B shape), printed as "[figure]" lines. Random
// data, never zeros; no correctness claims here (the other suites make those).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "harness.hpp"
#include "sample_launch.hpp"
#include "sample_layout.cuh"

namespace kern_gpu_test {
namespace {

constexpr int H = 32, KV = 8, hd = 128, P = 16, kHidden = 2560, kVocab = 151936;
constexpr int kWidth = (H + 2 * KV) * hd;

struct DecodeSetup {
  int seqs, len, max_pages;
  int64_t page_stride;
  std::unique_ptr<Device<bf16_bits>> cache, qkv, out;
  std::unique_ptr<Device<int32_t>> table, lens;

  DecodeSetup(std::mt19937_64& rng, int seqs_, int len_) : seqs(seqs_), len(len_) {
    max_pages = (len + P - 1) / P;
    page_stride = 2LL * P * KV * hd;  // one layer
    const int pages = seqs * max_pages;
    cache = std::make_unique<Device<bf16_bits>>(random_bf16(rng, static_cast<size_t>(pages) * page_stride, -1.f, 1.f));
    std::vector<int32_t> t(pages);
    std::iota(t.begin(), t.end(), 0);
    std::shuffle(t.begin(), t.end(), rng);
    table = std::make_unique<Device<int32_t>>(t);
    lens = std::make_unique<Device<int32_t>>(std::vector<int32_t>(seqs, len));
    qkv = std::make_unique<Device<bf16_bits>>(random_bf16(rng, static_cast<size_t>(seqs) * kWidth, -1.f, 1.f));
    out = std::make_unique<Device<bf16_bits>>(static_cast<size_t>(seqs) * H * hd);
  }
  double kv_bytes() const { return 2.0 * seqs * len * KV * hd * 2; }
};

// PerfGpu.DecodeAttention lives in attention_decode_test.cpp.

TEST(PerfGpu, PrefillAttention) {
  std::mt19937_64 rng(102);
  Fatbin fb("attention");
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (auto [prefix, rows] : {std::pair{0, 512}, std::pair{3584, 512}}) {
    DecodeSetup s(rng, 1, prefix + rows);
    Device<bf16_bits> qkv(random_bf16(rng, static_cast<size_t>(rows) * kWidth, -1.f, 1.f));
    Device<bf16_bits> out(static_cast<size_t>(rows) * H * hd);
    std::vector<int64_t> pos(rows);
    std::iota(pos.begin(), pos.end(), prefix);
    Device<int64_t> d_pos(pos);
    Device<int32_t> cu(std::vector<int32_t>{0, rows});
    const int per_block = 16 / (H / KV);
    const double t = fb.time_us("kern_attn_prefill_hd128", 5, dim3((rows + per_block - 1) / per_block, KV), dim3(hd),
                                qkv.get(), kWidth, s.cache->get(), s.table->get(), s.max_pages, s.lens->get(), cu.get(),
                                d_pos.get(), out.get(), rows, 1, H, KV, P, s.page_stride, scale, per_block);
    report("prefill rows " + std::to_string(rows) + " prefix " + std::to_string(prefix) + " us", t);
  }
}

TEST(PerfGpu, SmallKernels) {
  std::mt19937_64 rng(103);
  {
    Fatbin fb("argmax");
    Device<bf16_bits> logits(random_bf16(rng, kVocab, -10.f, 10.f));
    Device<float> pm(64);
    Device<int32_t> pi(64);
    Device<int64_t> out(1);
    report("argmax partial 1x151936 us", fb.time_us("kern_argmax_partial_bf16", 50, dim3(64, 1), dim3(256),
                                                    logits.get(), pm.get(), pi.get(), 1, kVocab, 64));
    report("argmax final us",
           fb.time_us("kern_argmax_final", 50, dim3(1), dim3(64), pm.get(), pi.get(), out.get(), 1, 64));
  }
  {
    Fatbin fb("rmsnorm");
    const int rows = 2048;
    Device<bf16_bits> x(random_bf16(rng, static_cast<size_t>(rows) * kHidden, -2.f, 2.f));
    Device<bf16_bits> d(random_bf16(rng, static_cast<size_t>(rows) * kHidden, -2.f, 2.f));
    Device<bf16_bits> w(random_bf16(rng, kHidden, 0.5f, 1.5f)), y(static_cast<size_t>(rows) * kHidden);
    report("add_rms_norm 2048x2560 us", fb.time_us("kern_fused_add_rms_norm_bf16", 20, dim3(rows), dim3(256), x.get(),
                                                   d.get(), w.get(), y.get(), rows, kHidden, 1e-6f));
    report("add_rms_norm 1x2560 us", fb.time_us("kern_fused_add_rms_norm_bf16", 50, dim3(1), dim3(256), x.get(),
                                                d.get(), w.get(), y.get(), 1, kHidden, 1e-6f));
  }
  {
    Fatbin fb("rope");
    const int rows = 2048, max_pos = 4096;
    Device<float> table(static_cast<size_t>(max_pos) * hd);
    fb.launch("kern_rope_table_f32", dim3(max_pos * hd / 2 / 256), dim3(256), table.get(), max_pos, hd, 1e6f);
    Device<bf16_bits> qkv(random_bf16(rng, static_cast<size_t>(rows) * kWidth, -1.f, 1.f));
    Device<bf16_bits> w(random_bf16(rng, hd, 0.5f, 1.5f));
    std::vector<int64_t> pos(rows), slots(rows);
    std::iota(pos.begin(), pos.end(), 0);
    std::iota(slots.begin(), slots.end(), 0);
    Device<int64_t> d_pos(pos), d_slots(slots);
    Device<bf16_bits> cache(static_cast<size_t>(rows) * 2 * KV * hd);
    report("qk_norm_rope_cache 2048 rows us",
           fb.time_us("kern_qk_norm_rope_cache_bf16", 20, dim3(rows, (H + 2 * KV + 3) / 4), dim3(128), qkv.get(),
                      w.get(), w.get(), table.get(), d_pos.get(), d_slots.get(), cache.get(), rows, H, KV, hd, P,
                      static_cast<int64_t>(2 * P * KV * hd), max_pos, 1e-6f));
  }
}

// The sampling op (kernels/sample.cu: the race kernel, then the cluster kernel) over the Qwen3
// vocabulary at batch 1 and 64, per setting, beside the cluster kernel alone (the op before the
// race kernel), the argmax op (partial + final) and a device-to-device copy of the logits (reads
// them once).
// Logits ~ N(0, 2) with a few boosted tokens (a peaked row, as a model's).
TEST(PerfGpu, Sample) {
  std::mt19937_64 rng(104);
  Fatbin argmax("argmax");
  SampleOp sample(kVocab, 64);
  struct Setting {
    const char* name;
    float temperature, top_p, min_p;
    int64_t top_k, n_logprobs;
  };
  const Setting settings[] = {
      {"greedy", 0.0f, 1.0f, 0.0f, 0, 0},
      {"temperature 0.8", 0.8f, 1.0f, 0.0f, 0, 0},
      {"top-k 50 top-p 0.9", 0.8f, 0.9f, 0.0f, 50, 0},
      {"min-p 0.05", 0.8f, 1.0f, 0.05f, 0, 0},
      {"temperature 0.8 logprobs 20", 0.8f, 1.0f, 0.0f, 0, 20},
      {"top-k 50 top-p 0.9 logprobs 20", 0.8f, 0.9f, 0.0f, 50, 20},
      {"greedy logprobs 20", 0.0f, 1.0f, 0.0f, 0, 20},
      {"qwen3 thinking: temperature 0.6 top-k 20 top-p 0.95", 0.6f, 0.95f, 0.0f, 20, 0},
      {"qwen3 non-thinking: temperature 0.7 top-k 20 top-p 0.8", 0.7f, 0.8f, 0.0f, 20, 0},
  };
  for (int rows : {1, 64}) {
    std::normal_distribution<float> n(0.0f, 2.0f);
    std::vector<bf16_bits> host(static_cast<size_t>(rows) * kVocab);
    for (auto& x : host) x = float_to_bf16(n(rng));
    std::uniform_int_distribution<int> col(0, kVocab - 1);
    for (int r = 0; r < rows; ++r)
      for (float b : {9.0f, 8.0f, 7.0f, 6.0f}) host[static_cast<size_t>(r) * kVocab + col(rng)] = float_to_bf16(b);
    Device<bf16_bits> logits(host), copy(host.size());
    Device<int32_t> history(static_cast<size_t>(rows) * 8);
    Device<int64_t> tokens(rows);
    Device<float> logprobs(static_cast<size_t>(rows) * 21);
    Device<int32_t> top_ids(static_cast<size_t>(rows) * 20);
    const std::string b = " batch " + std::to_string(rows) + " vocab 151936 us";
    for (const Setting& s : settings) {
      std::vector<float> fp(static_cast<size_t>(rows) * 8, 0.0f);
      std::vector<int64_t> ip(static_cast<size_t>(rows) * 8, 0);
      for (int r = 0; r < rows; ++r) {
        float* f = &fp[static_cast<size_t>(r) * 8];
        f[0] = s.temperature, f[1] = s.top_p, f[2] = s.min_p, f[3] = 1.0f;
        int64_t* i = &ip[static_cast<size_t>(r) * 8];
        i[0] = s.top_k, i[1] = 7, i[2] = r, i[4] = s.n_logprobs;
      }
      Device<float> d_fp(fp);
      Device<int64_t> d_ip(ip);
      const SampleOp::Args args{logits.get(), d_fp.get(),     d_ip.get(), history.get(), tokens.get(),
                                logprobs.get(), top_ids.get(), rows,      8};
      const std::pair<SampleOp::Path, const char*> paths[] = {{SampleOp::Path::Op, "sample op "},
                                                                {SampleOp::Path::RaceOnly, "sample race kernel alone "},
                                                                {SampleOp::Path::ClusterOnly, "sample cluster kernel alone "}};
      for (const auto& [path, what] : paths) {
        const double us = graph_median_us([&](cudaStream_t st) { sample.enqueue(st, args, path); });
        check_cuda(cudaDeviceSynchronize(), "sample timing");
        report(what + std::string(s.name) + b, us);
      }
    }
    Device<float> pm(static_cast<size_t>(rows) * 64);
    Device<int32_t> pi(static_cast<size_t>(rows) * 64);
    report("argmax op" + b, graph_median_us([&](cudaStream_t st) {
             argmax.enqueue("kern_argmax_partial_bf16", st, dim3(64, rows), dim3(256), logits.get(), pm.get(), pi.get(),
                            rows, kVocab, 64);
             argmax.enqueue("kern_argmax_final", st, dim3(rows), dim3(64), pm.get(), pi.get(), tokens.get(), rows, 64);
           }));
    report("logits D2D copy (read once)" + b, graph_median_us([&](cudaStream_t st) {
             check_cuda(cudaMemcpyAsync(copy.get(), logits.get(), logits.bytes(), cudaMemcpyDeviceToDevice, st),
                        "copy");
           }));
  }
}

}  // namespace
}  // namespace kern_gpu_test
