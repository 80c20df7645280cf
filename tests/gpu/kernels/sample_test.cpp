// GPU checks of kernels/sample.cu (kern_sample_bf16) against the float64 reference
// (sample_reference.hpp): greedy tokens exact (and equal to kern_argmax_* without penalties), the
// sampled distribution by chi-square over 100,000 draws per setting (every path of the kernel:
// temperature only, min-p only, the candidate path for top-k / top-p, the bisection fallbacks),
// log-probs within 1e-3 and top ids exact, outputs written exactly where they should be,
// bitwise determinism across batch positions and repeats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <limits>
#include <memory>
#include <numeric>

#include "harness.hpp"
#include "sample_launch.hpp"
#include "sample_reference.hpp"

namespace kern_gpu_test {
namespace {

using kern_sample_ref::chi_square;
using kern_sample_ref::ChiSquare;
using kern_sample_ref::sample_reference;
using kern_sample_ref::SampleParams;
using kern_sample_ref::SampleReference;

constexpr int kLp = 21, kTop = 20;
constexpr int kQwenVocab = 151936;
struct RowIn {
  SampleParams p;
  int64_t history_len = -1;  // -1: p.history.size()
  int64_t forced_key = 0;    // sampling_keys[5]: a forced token + 1 (0: none)
  int64_t bias_key = -1;     // sampling_keys[6]: logit-bias entries (-1: p.bias.size())
};

struct Outputs {
  std::vector<int64_t> tokens;
  std::vector<float> logprobs;   // [rows, 21]
  std::vector<int32_t> top_ids;  // [rows, 20]
  std::vector<int32_t> route;    // [rows]: 1 where the race kernel took the row
};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

using Path = SampleOp::Path;

// One launch of the op (or the cluster kernel alone) over `rows` rows of logits already on the device.
class Sampler {
 public:
  explicit Sampler(Path path = Path::Op) : path_(path) {}

  Outputs run(const bf16_bits* d_logits, int vocab, const std::vector<RowIn>& in, int hist_stride) {
    const int rows = static_cast<int>(in.size());
    std::vector<float> fp(static_cast<size_t>(rows) * 8, 0.0f);
    std::vector<int64_t> ip(static_cast<size_t>(rows) * 8, 0);
    std::vector<int32_t> hist(static_cast<size_t>(std::max(1, rows * hist_stride)), -7);
    for (int r = 0; r < rows; ++r) {
      const SampleParams& p = in[r].p;
      float* f = &fp[static_cast<size_t>(r) * 8];
      f[0] = p.temperature, f[1] = p.top_p, f[2] = p.min_p, f[3] = p.repetition, f[4] = p.presence, f[5] = p.frequency;
      int64_t* i = &ip[static_cast<size_t>(r) * 8];
      i[0] = p.top_k, i[1] = p.seed, i[2] = p.counter;
      i[3] = in[r].history_len >= 0 ? in[r].history_len : static_cast<int64_t>(p.history.size());
      i[4] = p.n_logprobs;
      i[5] = in[r].forced_key;
      i[6] = in[r].bias_key >= 0 ? in[r].bias_key : static_cast<int64_t>(p.bias.size());
      for (size_t j = 0; j < p.history.size() && static_cast<int>(j) < hist_stride; ++j)
        hist[static_cast<size_t>(r) * hist_stride + j] = p.history[j];
      // the logit bias: the entries the kernel reads (at most 255 and half the stride) at the row's end
      const size_t nb = std::min<size_t>({p.bias.size(), 255, static_cast<size_t>(hist_stride / 2)});
      int32_t* tail = &hist[static_cast<size_t>(r) * hist_stride + hist_stride - 2 * nb];
      for (size_t k = 0; k < nb; ++k) {
        tail[2 * k] = p.bias[k].first;
        std::memcpy(&tail[2 * k + 1], &p.bias[k].second, 4);
      }
    }
    Device<float> d_fp(fp);
    Device<int64_t> d_ip(ip);
    Device<int32_t> d_hist(hist);
    Device<int64_t> d_tok(rows);
    Device<float> d_lp(static_cast<size_t>(rows) * kLp);
    Device<int32_t> d_top(static_cast<size_t>(rows) * kTop);
    if (!op_ || vocab != vocab_ || rows > rows_) {
      op_ = std::make_unique<SampleOp>(vocab, rows);
      vocab_ = vocab;
      rows_ = rows;
    }
    op_->enqueue(nullptr,
                 {d_logits, d_fp.get(), d_ip.get(), d_hist.get(), d_tok.get(), d_lp.get(), d_top.get(), rows, hist_stride},
                 path_);
    check_cuda(cudaDeviceSynchronize(), "sample op");
    return {d_tok.download(), d_lp.download(), d_top.download(), op_->route(rows)};
  }

  Outputs run(const std::vector<bf16_bits>& logits, int vocab, const std::vector<RowIn>& in, int hist_stride) {
    Device<bf16_bits> d(logits);
    return run(d.get(), vocab, in, hist_stride);
  }

 private:
  Path path_;
  std::unique_ptr<SampleOp> op_;
  int vocab_ = 0, rows_ = 0;
};

std::vector<float> row_floats(const std::vector<bf16_bits>& logits, int vocab, int r) {
  std::vector<float> out(vocab);
  for (int i = 0; i < vocab; ++i) out[i] = bf16_to_float(logits[static_cast<size_t>(r) * vocab + i]);
  return out;
}

// bf16 logits ~ N(0, sigma) with a few boosted tokens (a peaked, LLM-like row).
std::vector<bf16_bits> llm_row(std::mt19937_64& rng, int vocab, float sigma = 2.0f) {
  std::normal_distribution<float> n(0.0f, sigma);
  std::vector<bf16_bits> v(vocab);
  for (auto& x : v) x = float_to_bf16(n(rng));
  std::uniform_int_distribution<int> col(0, vocab - 1);
  const float boosts[] = {9.0f, 8.0f, 7.5f, 6.0f, 6.0f, 5.0f};
  for (float b : boosts) v[col(rng)] = float_to_bf16(b + n(rng) * 0.1f);
  return v;
}

// Checks what every row must satisfy: token in range and sampleable, logprobs[0] of the token,
// the top-n block, and the poison left untouched after it.
void check_row(const Outputs& o, int r, const std::vector<float>& logits, const SampleReference& ref,
               const std::string& what) {
  SCOPED_TRACE(what + " row " + std::to_string(r));
  const int64_t tok = o.tokens[r];
  ASSERT_GE(tok, 0);
  ASSERT_LT(tok, static_cast<int64_t>(logits.size()));
  if (ref.greedy) {
    EXPECT_EQ(tok, ref.greedy_token);
  } else {
    EXPECT_GT(ref.probs[tok], 0.0) << "token " << tok << " outside the kept set";
  }
  const float* lp = &o.logprobs[static_cast<size_t>(r) * kLp];
  const int32_t* ids = &o.top_ids[static_cast<size_t>(r) * kTop];
  auto near = [](double got, double want) {
    return std::isnan(want) ? std::isnan(got) : std::fabs(got - want) <= 1e-3;
  };
  EXPECT_TRUE(near(lp[0], ref.logprobs[tok])) << lp[0] << " vs " << ref.logprobs[tok];
  for (int j = 0; j < ref.n_logprobs; ++j) {
    EXPECT_EQ(ids[j], ref.top_ids[j]) << "top " << j;
    EXPECT_TRUE(near(lp[1 + j], ref.logprobs[ref.top_ids[j]])) << "top " << j << ": " << lp[1 + j];
  }
  for (int j = ref.n_logprobs; j < kTop; ++j) {
    EXPECT_EQ(ids[j], -1) << "top_ids " << j << " written";
    EXPECT_TRUE(std::isnan(lp[1 + j])) << "logprobs " << 1 + j << " written";
  }
}

// ---- greedy ---------------------------------------------------------------------------------------

void run_argmax(const std::vector<bf16_bits>& logits, int rows, int vocab, std::vector<int64_t>& out) {
  Fatbin fb("argmax");
  const int nblocks = 64;
  Device<bf16_bits> d(logits);
  Device<float> pm(static_cast<size_t>(rows) * nblocks);
  Device<int32_t> pi(static_cast<size_t>(rows) * nblocks);
  Device<int64_t> o(rows);
  fb.launch("kern_argmax_partial_bf16", dim3(nblocks, rows), dim3(256), d.get(), pm.get(), pi.get(), rows, vocab,
            nblocks);
  fb.launch("kern_argmax_final", dim3(rows), dim3(64), pm.get(), pi.get(), o.get(), rows, nblocks);
  out = o.download();
}

void check_greedy(int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int rows = 6;
  std::vector<bf16_bits> logits = random_bf16(rng, static_cast<size_t>(rows) * vocab, -8.0f, 8.0f);
  std::uniform_int_distribution<int> col(0, vocab - 1);
  const bf16_bits nan = 0x7fc0;
  // row 0: plain; row 1: the maximum tied at several columns (first and last too); row 2: NaNs,
  // also at the maximum's would-be place; row 3: all NaN; rows 4, 5: penalties (no penalties on
  // kern_argmax's side, so only the reference judges them)
  for (int k = 0; k < 4; ++k) logits[static_cast<size_t>(1) * vocab + col(rng)] = float_to_bf16(12.0f);
  logits[static_cast<size_t>(1) * vocab + vocab - 1] = float_to_bf16(12.0f);
  logits[static_cast<size_t>(1) * vocab] = float_to_bf16(12.0f);
  for (int k = 0; k < 50; ++k) logits[static_cast<size_t>(2) * vocab + col(rng)] = nan;
  logits[static_cast<size_t>(2) * vocab] = nan;
  for (int i = 0; i < vocab; ++i) logits[static_cast<size_t>(3) * vocab + i] = nan;
  std::vector<RowIn> in(rows);
  for (auto& r : in) r.p.temperature = 0.0f;
  in[1].p.temperature = -1.0f;
  in[2].p.temperature = std::numeric_limits<float>::quiet_NaN();
  // row 4: the top tokens are in the history: repetition 4 pushes them down (exact in f32)
  {
    std::vector<float> f = row_floats(logits, vocab, 4);
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return f[a] > f[b] || (f[a] == f[b] && a < b); });
    in[4].p.repetition = 4.0f;
    in[4].p.history = {order[0], order[1], order[0], vocab + 5, -3};
    in[5].p.frequency = 0.5f;  // frequency / presence: exact multiples of 1/4
    in[5].p.presence = 1.0f;
    in[5].p.history = {order[0], order[0], order[0], order[2]};
    if (vocab < 5) in[5].p.history.clear();
  }
  Sampler s;
  const Outputs o = s.run(logits, vocab, in, 8);
  std::vector<int64_t> am;
  run_argmax(logits, rows, vocab, am);
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> f = row_floats(logits, vocab, r);
    const SampleReference ref = sample_reference(f, in[r].p);
    ASSERT_TRUE(ref.greedy);
    check_row(o, r, f, ref, "greedy vocab " + std::to_string(vocab));
    if (r < 4) {
      EXPECT_EQ(o.tokens[r], am[r]) << "vs kern_argmax, row " << r;
    }
  }
  EXPECT_EQ(o.tokens[3], 0);
}

TEST(SampleGpu, GreedyMatchesReferenceAndArgmax) {
  check_greedy(kQwenVocab, 201);
  check_greedy(32003, 202);
  check_greedy(1001, 203);
  check_greedy(37, 204);
}

// ---- distribution: chi-square -------------------------------------------------------------------

// Moves top_p (and min_p) to the middle of the gap around its float64 decision (between the
// cumulative masses, resp. log-probability ratios, of the tokens either side), so that a kernel
// deciding in f32 cannot decide differently; the setting's meaning is unchanged up to that gap.
// The reference distribution with top-k (and penalties, temperature) only, and its ids by
// descending probability (ties in id order).
struct Ranked {
  SampleReference base;
  std::vector<int32_t> order;
};
Ranked rank_before_cutoffs(const std::vector<float>& logits, const SampleParams& p) {
  SampleParams q = p;
  q.top_p = 1.0f;
  q.min_p = 0.0f;
  Ranked r{sample_reference(logits, q), std::vector<int32_t>(logits.size())};
  std::iota(r.order.begin(), r.order.end(), 0);
  std::stable_sort(r.order.begin(), r.order.end(), [&](int a, int b) { return r.base.probs[a] > r.base.probs[b]; });
  return r;
}

SampleParams center_decisions(const std::vector<float>& logits, SampleParams p) {
  const auto [base, order] = rank_before_cutoffs(logits, p);
  if (p.top_p < 1.0f && p.top_p > 0.0f) {
    double cum = 0.0;
    for (int32_t i : order) {
      if (base.probs[i] <= 0.0) break;
      const double next = cum + base.probs[i];
      if (next >= p.top_p) {
        p.top_p = static_cast<float>(0.5 * (cum + next));
        break;
      }
      cum = next;
    }
  }
  if (p.min_p > 0.0f && p.min_p < 1.0f) {
    const double pmax = base.probs[order[0]];
    double above = 0.0;  // the smallest log ratio still kept
    for (int32_t i : order) {
      if (base.probs[i] <= 0.0) break;
      const double lr = std::log(base.probs[i] / pmax);
      if (lr < std::log(p.min_p)) {
        p.min_p = static_cast<float>(std::exp(0.5 * (above + lr)));
        break;
      }
      above = lr;
    }
  }
  return p;
}

// The smallest distance of the float64 decision points (top-p crossing, min-p threshold) from the
// row's values, relative: a kernel in f32 decides the same as the reference when it is large.
double decision_margin(const std::vector<float>& logits, const SampleParams& p) {
  const auto [base, order] = rank_before_cutoffs(logits, p);
  double margin = 1.0;
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    for (int32_t i : order) {
      if (base.probs[i] <= 0.0) break;
      margin = std::min(margin, std::fabs(cum - p.top_p));
      cum += base.probs[i];
      margin = std::min(margin, std::fabs(cum - p.top_p));
      if (cum >= p.top_p) break;
    }
  }
  if (p.min_p > 0.0f) {
    const double pmax = base.probs[order[0]];
    for (int32_t i : order) {
      if (base.probs[i] <= 0.0) break;
      margin = std::min(margin, std::fabs(std::log(base.probs[i] / pmax) - std::log(p.min_p)));
    }
  }
  return margin;
}

struct ChiCase {
  std::string name;
  int vocab;
  std::vector<bf16_bits> row;
  SampleParams p;
  int hist_stride = 1;
};

// Where the op should leave a row (docs/kernels.md, "Sampling"): 1 the race kernel, 0 the cluster
// kernel, -1 either (min-p alone: rejection, decided by the draw). The race kernel takes every row
// but forced ones and those with both penalties and a ranking (top-k, top-p, top log-probs); a
// top-k / top-p row only when its kept set is a proper prefix of the row's 64 largest keys
// (top_k <= 63, fewer than 64 kept).
int expected_route(const SampleParams& p, int64_t history_len, int vocab, const SampleReference& ref) {
  const bool rep = p.repetition > 0.0f && std::isfinite(p.repetition) && p.repetition != 1.0f;
  const bool pre = std::isfinite(p.presence) && p.presence != 0.0f;
  const bool fre = std::isfinite(p.frequency) && p.frequency != 0.0f;
  const bool penalties = history_len > 0 && (rep || pre || fre);
  const bool greedy = !(p.temperature > 0.0f);
  const bool topk = p.top_k > 0 && p.top_k < vocab, topp = p.top_p < 1.0f;
  const bool ranks = (!greedy && (topk || topp)) || p.n_logprobs > 0;  // the race kernel finds the row's top keys
  if (!p.bias.empty()) return 0;  // (the cases' strides hold their entries)
  if (penalties && ranks) return 0;
  if (!greedy && (topk || topp)) {
    if (topk && p.top_k >= 64) return 0;
    int64_t kept = 0;
    for (double pr : ref.probs) kept += pr > 0.0 ? 1 : 0;
    return kept < 64 ? 1 : 0;
  }
  if (!greedy && p.min_p > 0.0f) return -1;
  return 1;
}

void chi_square_case(const ChiCase& c, int rows_per_launch = 1000, int launches = 100, Path path = Path::Op) {
  SCOPED_TRACE(c.name + (path == Path::Op ? " (op)" : " (cluster kernel only)"));
  std::vector<float> logits(c.row.size());
  for (size_t i = 0; i < c.row.size(); ++i) logits[i] = bf16_to_float(c.row[i]);
  const SampleParams params = center_decisions(logits, c.p);
  const SampleReference ref = sample_reference(logits, params);
  ASSERT_FALSE(ref.greedy);
  // the kernel's sums are f32 (relative error ~1e-6): decisions closer than this could go either way
  ASSERT_GT(decision_margin(logits, params), 5e-6) << "a top-p / min-p decision too close to call in f32";
  int kept = 0;
  for (double pr : ref.probs) kept += pr > 0.0 ? 1 : 0;
  std::vector<bf16_bits> all(static_cast<size_t>(rows_per_launch) * c.vocab);
  for (int r = 0; r < rows_per_launch; ++r)
    std::copy(c.row.begin(), c.row.end(), all.begin() + static_cast<size_t>(r) * c.vocab);
  Device<bf16_bits> d(all);
  Sampler s(path);
  const int64_t draws = static_cast<int64_t>(rows_per_launch) * launches;
  std::vector<int64_t> counts(c.vocab, 0);
  int64_t raced = 0;
  std::vector<RowIn> in(rows_per_launch);
  double worst_lp = 0.0;
  for (int l = 0; l < launches; ++l) {
    for (int r = 0; r < rows_per_launch; ++r) {
      in[r].p = params;
      in[r].p.seed = 0x5eed;
      in[r].p.counter = static_cast<int64_t>(l) * rows_per_launch + r;
    }
    const Outputs o = s.run(d.get(), c.vocab, in, c.hist_stride);
    for (int r = 0; r < rows_per_launch; ++r) {
      const int64_t t = o.tokens[r];
      ASSERT_TRUE(t >= 0 && t < c.vocab) << "token " << t;
      ++counts[t];
      worst_lp = std::max(worst_lp, std::fabs(o.logprobs[static_cast<size_t>(r) * kLp] - ref.logprobs[t]));
      raced += o.route[r];
    }
  }
  const ChiSquare cs = chi_square(counts, ref.probs, draws);
  std::printf("[chi-square] %s%s (top_p %.6g, min_p %.6g): %d kept tokens, %.4f raced, %s\n", c.name.c_str(),
              path == Path::Op ? "" : " (cluster only)", params.top_p, params.min_p, kept,
              static_cast<double>(raced) / static_cast<double>(draws), cs.describe().c_str());
  const int want = path == Path::ClusterOnly
                       ? 0
                       : expected_route(params, std::min<int64_t>(params.history.size(), c.hist_stride), c.vocab, ref);
  if (want == 0) {
    EXPECT_EQ(raced, 0) << "the cluster kernel's rows";
  } else if (want == 1) {
    EXPECT_EQ(raced, draws) << "every draw taken by the race kernel";
  } else {
    EXPECT_GT(raced, 0) << "min-p: some draws accepted by the race";
  }
  EXPECT_EQ(cs.impossible, 0) << cs.describe();
  // a correct kernel fails one setting with probability 1e-6
  EXPECT_GT(cs.pvalue, 1e-6) << cs.describe();
  EXPECT_LT(worst_lp, 1e-3);
}

std::vector<ChiCase> chi_cases() {
  std::mt19937_64 rng(301);
  std::vector<ChiCase> cases;
  const int v = 32003;  // odd: rows start off 16-byte boundaries
  auto add = [&](std::string name, int vocab, std::vector<bf16_bits> row, SampleParams p, int stride = 1) {
    cases.push_back({std::move(name), vocab, std::move(row), std::move(p), stride});
  };
  SampleParams p;
  p.temperature = 0.8f;
  add("temperature 0.8", v, llm_row(rng, v), p);
  p = {};
  p.temperature = 1.0f;
  p.top_k = 50;
  add("top-k 50", v, llm_row(rng, v), p);
  p = {};
  p.temperature = 0.9f;
  p.top_p = 0.9f;
  add("top-p 0.9 (fallback: 5416 kept)", v, llm_row(rng, v), p);
  p = {};
  p.min_p = 0.05f;
  add("min-p 0.05", v, llm_row(rng, v), p);
  // every filter and the penalties together (penalised tokens: the top few and some of the bulk)
  {
    std::vector<bf16_bits> row = llm_row(rng, v);
    std::vector<float> f(v);
    for (int i = 0; i < v; ++i) f[i] = bf16_to_float(row[i]);
    std::vector<int32_t> order(v);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return f[a] > f[b]; });
    p = {};
    p.temperature = 0.7f;
    p.top_k = 100;
    p.top_p = 0.8f;
    p.min_p = 0.02f;
    p.repetition = 1.3f;
    p.frequency = 0.2f;
    p.presence = 0.3f;
    p.history = {order[0], order[0], order[3], order[7], order[7], order[7], 5, 17, 5, 40000, -1};
    add("all filters + penalties", v, row, p, 16);
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    add("temperature + penalties", v, row, p, 16);
  }
  // the bisection fallback: more candidates than the kernel's list holds
  p = {};
  p.top_k = 3000;
  add("top-k 3000 (fallback)", v, llm_row(rng, v, 1.0f), p);
  {
    std::vector<bf16_bits> flat = random_bf16(rng, v, -0.5f, 0.5f);
    p = {};
    p.top_p = 0.5f;
    add("flat top-p 0.5 (fallback)", v, flat, p);
  }
  {  // a peakier row: top-p through the candidate list (352 kept)
    std::mt19937_64 r2(303);
    llm_row(r2, v, 1.0f);
    p = {};
    p.temperature = 0.7f;
    p.top_p = 0.9f;
    add("peaked top-p 0.9", v, llm_row(r2, v, 1.0f), p);
  }
  // the Qwen3 vocabulary
  p = {};
  p.temperature = 0.7f;
  p.top_k = 50;
  p.top_p = 0.9f;
  add("151936 top-k 50 top-p 0.9", kQwenVocab, llm_row(rng, kQwenVocab), p);
  return cases;
}

constexpr int kChiCases = 10;

// Every case through the cluster kernel alone (all its paths, whichever kernel production uses).
class SampleChiSquare : public ::testing::TestWithParam<int> {};

TEST_P(SampleChiSquare, MatchesTheExactDistribution) {
  static const std::vector<ChiCase> cases = chi_cases();
  ASSERT_EQ(cases.size(), static_cast<size_t>(kChiCases));
  const ChiCase& c = cases.at(GetParam());
  chi_square_case(c, c.vocab > 100000 ? 500 : 1000, c.vocab > 100000 ? 200 : 100, Path::ClusterOnly);
}
INSTANTIATE_TEST_SUITE_P(SampleGpu, SampleChiSquare, ::testing::Range(0, kChiCases));

// ---- logit bias -----------------------------------------------------------------------------------

// Rows with a logit bias (the cluster kernel's), greedy, beside the same rows without: the bias moves
// the token where the reference says, the log-probs stay the raw logits', and the unbiased rows are
// untouched by their neighbours' entries.
void check_logit_bias(int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int rows = 8, stride = 600;
  std::vector<bf16_bits> logits = random_bf16(rng, static_cast<size_t>(rows) * vocab, -8.0f, 8.0f);
  std::vector<RowIn> in(rows);
  std::uniform_int_distribution<int> col(0, vocab - 1);
  for (int r = 0; r < rows; ++r) {
    in[r].p.temperature = 0.0f;
    in[r].p.n_logprobs = r % 2 == 0 ? 0 : 5;
  }
  auto top = [&](int r) {
    const std::vector<float> f = row_floats(logits, vocab, r);
    return static_cast<int32_t>(std::max_element(f.begin(), f.end()) - f.begin());
  };
  const int32_t low = col(rng);
  in[0].p.bias = {{low, 20.0f}};                  // a bulk token lifted past the row's maximum (<= 8)
  in[1].p.bias = {{top(1), -100.0f}};              // the argmax banned: the second largest wins
  in[2].p.bias = {{low, 18.0f}, {top(2), -1.5f}};  // several entries, the repetition penalty on the lifted one
  in[2].p.history = {low, low};
  in[2].p.repetition = 8.0f;  // (low + 18) / 8 <= 3.25: the penalty puts it back below
  in[3].p.bias = {{vocab + 7, 50.0f}, {-4, 50.0f}, {low, std::numeric_limits<float>::quiet_NaN()}};  // all ignored
  for (int k = 0; k < 200; ++k) in[4].p.bias.push_back({k * (vocab / 200), k == 77 ? 30.0f : -0.5f});
  in[5].p.bias = {{low, 20.0f}};
  in[5].bias_key = 0;  // entries written, none announced: no bias
  // row 6: 300 entries announced, the kernel reads 255 (the last, +40, would win)
  for (int k = 0; k < 300; ++k) in[6].p.bias.push_back({k, k == 299 ? 40.0f : 0.25f});
  // row 7: no bias (the race kernel's), between biased rows
  Sampler s;
  const Outputs o = s.run(logits, vocab, in, stride);
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> f = row_floats(logits, vocab, r);
    SampleParams p = in[r].p;
    if (r == 5) p.bias.clear();
    if (r == 6) p.bias.resize(255);
    const SampleReference ref = sample_reference(f, p);
    ASSERT_TRUE(ref.greedy);
    check_row(o, r, f, ref, "logit bias vocab " + std::to_string(vocab));
    if (r <= 4 || r == 6) {
      EXPECT_EQ(o.route[r], 0) << "a biased row is the cluster kernel's, row " << r;
    }
  }
  EXPECT_EQ(o.route[7], 1);
  EXPECT_EQ(o.tokens[0], low);
  EXPECT_NE(o.tokens[1], top(1));
  EXPECT_EQ(o.tokens[3], top(3));
  EXPECT_EQ(o.tokens[4], 77 * (vocab / 200));
  EXPECT_EQ(o.tokens[5], top(5));
  if (top(6) != 299) {
    EXPECT_NE(o.tokens[6], 299) << "entry 299 lies past the 255 the kernel reads";
  }
}

TEST(SampleGpu, LogitBiasMovesTheGreedyTokenNotTheLogprobs) {
  check_logit_bias(kQwenVocab, 211);
  check_logit_bias(32003, 212);
  check_logit_bias(1001, 213);
}

// The op as production runs it, on every setting: the race kernel's Gumbel-max draws over every
// token and over a top-k / top-p row's kept prefix of its 64 largest keys, min-p by rejection with
// the cluster kernel drawing the rejected rows (the mixture must still be exactly the min-p
// distribution), the rows it leaves to the cluster kernel.
std::vector<ChiCase> race_cases() {
  std::vector<ChiCase> cases = chi_cases();
  std::mt19937_64 rng(305);
  SampleParams p;
  p.temperature = 1.0f;
  cases.push_back({"151936 temperature 1.0", kQwenVocab, llm_row(rng, kQwenVocab), p, 1});
  p.temperature = 1.5f;
  p.min_p = 0.1f;
  cases.push_back({"151936 temperature 1.5 min-p 0.1", kQwenVocab, llm_row(rng, kQwenVocab), p, 1});
  {  // most of the mass below the min-p threshold: most draws rejected to the cluster kernel
    std::vector<bf16_bits> row = random_bf16(rng, 32003, -1.0f, 1.0f);
    std::uniform_int_distribution<int> col(0, 32002);
    for (int k = 0; k < 8; ++k) row[col(rng)] = float_to_bf16(6.0f + 0.25f * k);
    p = {};
    p.min_p = 0.2f;
    cases.push_back({"heavy tail min-p 0.2", 32003, row, p, 1});
  }
  {  // a flat row: every token's noise matters
    p = {};
    p.temperature = 2.0f;
    cases.push_back({"flat temperature 2.0", 32003, random_bf16(rng, 32003, -0.5f, 0.5f), p, 1});
  }
  // a logit bias (the cluster kernel's rows): the row's maximum banned, bulk tokens lifted into the
  // top, alone and under Qwen3's thinking settings with a penalty (biases exact in f32 beside bf16)
  for (int thinking = 0; thinking < 2; ++thinking) {
    std::vector<bf16_bits> row = llm_row(rng, kQwenVocab);
    std::vector<float> f(kQwenVocab);
    for (int i = 0; i < kQwenVocab; ++i) f[i] = bf16_to_float(row[i]);
    const int32_t top = static_cast<int32_t>(std::max_element(f.begin(), f.end()) - f.begin());
    p = {};
    p.temperature = thinking ? 0.6f : 1.0f;
    p.bias = {{top, -100.0f}, {11, 7.5f}, {12345, 8.0f}, {150000, 6.5f}, {99, -3.0f}};
    if (thinking) {
      p.top_k = 20;
      p.top_p = 0.95f;
      p.presence = 1.5f;
      p.history = {12345, 7};
    }
    cases.push_back({thinking ? "151936 logit bias, top-k 20 top-p 0.95 presence 1.5"
                              : "151936 logit bias temperature 1.0",
                     kQwenVocab, row, p, 16});
  }
  return cases;
}

constexpr int kRaceCases = 16;

class SampleChiSquareOp : public ::testing::TestWithParam<int> {};

TEST_P(SampleChiSquareOp, MatchesTheExactDistribution) {
  static const std::vector<ChiCase> cases = race_cases();
  ASSERT_EQ(cases.size(), static_cast<size_t>(kRaceCases));
  const ChiCase& c = cases.at(GetParam());
  chi_square_case(c, c.vocab > 100000 ? 500 : 1000, c.vocab > 100000 ? 200 : 100, Path::Op);
}
INSTANTIATE_TEST_SUITE_P(SampleGpu, SampleChiSquareOp, ::testing::Range(0, kRaceCases));

// A small vocabulary with a tiny last CTA (vocab 37: 5 tokens per CTA), every path.
TEST(SampleGpu, ChiSquareTinyVocab) {
  std::mt19937_64 rng(302);
  std::vector<bf16_bits> row = random_bf16(rng, 37, -2.0f, 2.0f);
  SampleParams p;
  chi_square_case({"vocab 37 temperature", 37, row, p}, 1000, 100);
  chi_square_case({"vocab 37 temperature", 37, row, p}, 1000, 100, Path::ClusterOnly);
  p.top_k = 7;
  chi_square_case({"vocab 37 top-k 7", 37, row, p}, 1000, 100);
  p.top_k = 0;
  p.top_p = 0.6f;
  chi_square_case({"vocab 37 top-p 0.6", 37, row, p}, 1000, 100);
  p.top_p = 1.0f;
  p.min_p = 0.3f;
  chi_square_case({"vocab 37 min-p 0.3", 37, row, p}, 1000, 100);
  chi_square_case({"vocab 37 min-p 0.3", 37, row, p}, 1000, 100, Path::ClusterOnly);
}

// ---- log-probs ------------------------------------------------------------------------------------

void check_logprobs(int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int rows = 6;
  // narrow ranges make many bf16 ties, so "ties to the lower id" is exercised
  std::vector<bf16_bits> logits = random_bf16(rng, static_cast<size_t>(rows) * vocab, -3.0f, 3.0f);
  for (int i = 0; i < vocab; ++i) logits[static_cast<size_t>(3) * vocab + i] = float_to_bf16(1.5f);  // flat: fallback
  std::uniform_int_distribution<int> col(0, vocab - 1);
  for (int k = 0; k < 10; ++k) logits[static_cast<size_t>(4) * vocab + col(rng)] = 0x7fc0;  // NaNs
  const std::vector<bf16_bits> peaked = llm_row(rng, vocab);
  std::copy(peaked.begin(), peaked.end(), logits.begin() + static_cast<size_t>(5) * vocab);
  std::vector<RowIn> in(rows);
  in[0].p.temperature = 0.0f;
  in[0].p.n_logprobs = 20;
  in[1].p.n_logprobs = 5;
  in[1].p.top_k = 40;
  in[2].p.n_logprobs = 100;  // clamped to 20
  in[2].p.min_p = 0.1f;
  in[3].p.n_logprobs = 20;
  in[4].p.n_logprobs = 20;
  in[4].p.top_p = 0.95f;
  in[5].p.n_logprobs = 1;
  in[5].p.repetition = 2.0f;
  in[5].p.history = {0, 1, 2};
  for (int r = 0; r < rows; ++r) {
    in[r].p.counter = r;
    in[r].p = center_decisions(row_floats(logits, vocab, r), in[r].p);
  }
  Sampler s;
  const Outputs o = s.run(logits, vocab, in, 4);
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> f = row_floats(logits, vocab, r);
    check_row(o, r, f, sample_reference(f, in[r].p), "logprobs vocab " + std::to_string(vocab));
  }
}

TEST(SampleGpu, LogprobsAndTopIds) {
  check_logprobs(kQwenVocab, 401);
  check_logprobs(32003, 402);
  check_logprobs(1001, 403);
  check_logprobs(37, 404);
}

// A forced row (sampling_keys[5] = id + 1: a prompt position scored) emits that id whatever its
// settings, with the log-prob of the raw logits at it and the same top list as an unforced row;
// keys outside [1, vocab] force nothing. Its neighbours in the batch are unaffected.
TEST(SampleGpu, ForcedTokensGiveTheirLogprobs) {
  std::mt19937_64 rng(411);
  for (int vocab : {kQwenVocab, 1001}) {
    SCOPED_TRACE(vocab);
    std::vector<RowIn> in;
    std::vector<int64_t> want;  // the forced id, or -1 (the row samples as usual)
    auto row = [&](int64_t forced_key, auto set) {
      RowIn r;
      r.p.counter = static_cast<int64_t>(in.size());
      r.p.seed = 5;
      r.p.n_logprobs = 5;
      r.forced_key = forced_key;
      set(r);
      in.push_back(r);
      want.push_back(forced_key >= 1 && forced_key <= vocab ? forced_key - 1 : -1);
    };
    row(1, [](RowIn&) {});                                           // id 0, greedy settings
    row(vocab, [](RowIn& r) { r.p.temperature = 0.8f; });            // the last id, sampling settings
    row(vocab / 2 + 1, [](RowIn& r) { r.p.top_k = 20, r.p.temperature = 1.0f; });
    row(7, [](RowIn& r) { r.p.n_logprobs = 0; });                    // the chosen log-prob only
    row(vocab + 1, [](RowIn&) {});                                   // out of range: greedy
    row(-3, [](RowIn& r) { r.p.temperature = 0.7f; });               // negative: samples
    row(0, [](RowIn&) {});                                           // none: greedy
    std::vector<bf16_bits> logits;
    for (size_t r = 0; r < in.size(); ++r) {
      const auto one = llm_row(rng, vocab);
      logits.insert(logits.end(), one.begin(), one.end());
    }
    for (Path path : {Path::Op, Path::ClusterOnly}) {
      Sampler sampler(path);
      const Outputs o = sampler.run(logits, vocab, in, 1);
      for (size_t r = 0; r < in.size(); ++r) {
        SCOPED_TRACE("row " + std::to_string(r));
        const std::vector<float> x = row_floats(logits, vocab, static_cast<int>(r));
        if (want[r] < 0) {
          check_row(o, static_cast<int>(r), x, sample_reference(x, in[r].p), "unforced");
          continue;
        }
        EXPECT_EQ(o.tokens[r], want[r]);
        SampleParams greedy = in[r].p;
        greedy.temperature = 0.0f;
        const SampleReference ref = sample_reference(x, greedy);
        const float* lp = &o.logprobs[r * kLp];
        EXPECT_NEAR(lp[0], ref.logprobs[want[r]], 1e-3);
        for (int j = 0; j < ref.n_logprobs; ++j) {
          EXPECT_EQ(o.top_ids[r * kTop + j], ref.top_ids[j]) << "top " << j;
          EXPECT_NEAR(lp[1 + j], ref.logprobs[ref.top_ids[j]], 1e-3) << "top " << j;
        }
        EXPECT_EQ(o.route[r], 0) << "a forced row is the cluster kernel's";
      }
    }
  }
}

// ---- parameters out of range, mixed settings ------------------------------------------------------

TEST(SampleGpu, MixedSettingsAndOutOfRangeParameters) {
  std::mt19937_64 rng(501);
  const int vocab = 32003, stride = 6;
  std::vector<RowIn> in;
  auto row = [&](auto set) {
    RowIn r;
    r.p.counter = static_cast<int64_t>(in.size());
    r.p.seed = 77;
    set(r);
    in.push_back(r);
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  row([](RowIn& r) { r.p.temperature = 0.0f; });
  row([](RowIn&) {});
  row([](RowIn& r) { r.p.top_k = 20; });
  row([](RowIn& r) { r.p.top_p = 0.7f; });
  row([](RowIn& r) { r.p.min_p = 0.2f; });
  row([](RowIn& r) { r.p.top_k = 2500; });        // fallback
  row([&](RowIn& r) { r.p.temperature = nan; });  // greedy
  row([](RowIn& r) { r.p.top_k = -5; });          // off
  row([](RowIn& r) { r.p.top_k = 1 << 20; });     // >= vocab: off
  row([&](RowIn& r) {
    r.p.top_p = nan;
    r.p.min_p = nan;
  });                                            // off
  row([](RowIn& r) { r.p.min_p = 3.0f; });       // clamped to 1
  row([](RowIn& r) { r.p.n_logprobs = 1000; });  // clamped to 20
  row([](RowIn& r) { r.p.n_logprobs = -4; });    // 0
  row([&](RowIn& r) {
    r.p.repetition = nan;
    r.p.presence = INFINITY;
    r.p.temperature = 0.0f;
    r.p.history = {3};
  });
  row([](RowIn& r) {  // ids out of range ignored; history_len past the stride clamped
    r.p.temperature = 0.0f;
    r.p.repetition = 1e6f;
    r.p.history = {-1, vocab + 3, 1 << 30, 11, 12, 13};
    r.history_len = 1000;
  });
  row([](RowIn& r) {
    r.p.temperature = 0.0f;
    r.history_len = -9;
    r.p.history = {};
  });
  row([](RowIn& r) {
    r.p.temperature = 1e-6f;
    r.p.top_k = 3;
  });  // huge scaled logits
  std::vector<bf16_bits> logits;
  for (size_t r = 0; r < in.size(); ++r) {
    const std::vector<bf16_bits> one = llm_row(rng, vocab);
    logits.insert(logits.end(), one.begin(), one.end());
  }
  // row 14 penalises its top tokens 11..13 by making them the maximum
  for (int i : {11, 12, 13}) logits[static_cast<size_t>(14) * vocab + i] = float_to_bf16(20.0f + i);
  for (size_t r = 0; r < in.size(); ++r)
    in[r].p = center_decisions(row_floats(logits, vocab, static_cast<int>(r)), in[r].p);
  Sampler s;
  const Outputs o = s.run(logits, vocab, in, stride);
  for (size_t r = 0; r < in.size(); ++r) {
    const std::vector<float> f = row_floats(logits, vocab, static_cast<int>(r));
    SampleParams p = in[r].p;
    if (p.history.size() > static_cast<size_t>(stride)) p.history.resize(stride);
    check_row(o, static_cast<int>(r), f, sample_reference(f, p), "mixed");
  }
  EXPECT_TRUE(o.tokens[14] < 11 || o.tokens[14] > 13) << "penalised tokens 11..13 still the maximum";
  for (size_t r = 0; r < in.size(); ++r) {
    SampleParams p = in[r].p;
    if (p.history.size() > static_cast<size_t>(stride)) p.history.resize(stride);
    const int64_t len = std::min<int64_t>(in[r].history_len >= 0 ? in[r].history_len : static_cast<int64_t>(p.history.size()),
                                          stride);
    const int want = expected_route(p, len, vocab, sample_reference(row_floats(logits, vocab, static_cast<int>(r)), p));
    if (want >= 0) {
      EXPECT_EQ(o.route[r], want) << "row " << r;
    }
  }
  // the same rows through the cluster kernel alone
  const Outputs oc = Sampler(Path::ClusterOnly).run(logits, vocab, in, stride);
  for (size_t r = 0; r < in.size(); ++r) {
    SampleParams p = in[r].p;
    if (p.history.size() > static_cast<size_t>(stride)) p.history.resize(stride);
    const std::vector<float> f = row_floats(logits, vocab, static_cast<int>(r));
    check_row(oc, static_cast<int>(r), f, sample_reference(f, p), "mixed, cluster only");
  }
}

// ---- determinism ----------------------------------------------------------------------------------

// Rows whose large logits crowd a few chunks (a vocabulary's frequent tokens share low ids): the
// race kernel's threshold over the chunks' two largest keys then admits many candidates from those
// chunks. Up to kCands (1,024) it ranks them exactly; past it the row is the cluster kernel's.
// Either way the tokens lie in the kept set and the top log-probs are the reference's, in order.
TEST(SampleGpu, CrowdedChunksRankExactly) {
  std::mt19937_64 rng(611);
  const int vocab = kQwenVocab;
  std::normal_distribution<float> bulk(0.0f, 1.0f);
  std::uniform_real_distribution<float> high(5.0f, 6.0f);
  struct Crowd {
    int first, count;  // tokens [first, first + count) drawn high
    int route;         // where the row must be decided
  };
  const Crowd crowds[] = {
      {0, 300, 1},         // a chunk of 2,048 holding 300 high tokens: rescanned, ~360 candidates
      {2048, 800, 1},      // ~860 candidates: still held
      {0, 4096, 0},        // two whole chunks high: more than 1,024 candidates
      {151552, 384, 1},    // the last, short chunk all high
  };
  std::vector<bf16_bits> logits;
  std::vector<RowIn> in;
  for (const Crowd& c : crowds) {
    std::vector<bf16_bits> row(vocab);
    for (auto& x : row) x = float_to_bf16(bulk(rng));
    for (int i = c.first; i < std::min(vocab, c.first + c.count); ++i) row[i] = float_to_bf16(high(rng));
    logits.insert(logits.end(), row.begin(), row.end());
    for (int setting = 0; setting < 2; ++setting) {
      RowIn r;
      r.p.seed = 5;
      r.p.counter = static_cast<int64_t>(in.size());
      if (setting == 0) {  // Qwen3's recommended sampling
        r.p.temperature = 0.6f;
        r.p.top_k = 20;
        r.p.top_p = 0.95f;
      } else {  // greedy with the top 20 log-probs
        r.p.temperature = 0.0f;
        r.p.n_logprobs = 20;
      }
      in.push_back(r);
    }
  }
  // rows 2k and 2k + 1 share crowd k's logits
  std::vector<bf16_bits> all;
  for (size_t r = 0; r < in.size(); ++r)
    all.insert(all.end(), logits.begin() + static_cast<long>(r / 2) * vocab,
               logits.begin() + static_cast<long>(r / 2 + 1) * vocab);
  for (size_t r = 0; r < in.size(); ++r)
    in[r].p = center_decisions(row_floats(all, vocab, static_cast<int>(r)), in[r].p);
  Sampler s;
  const Outputs o = s.run(all, vocab, in, 1);
  for (size_t r = 0; r < in.size(); ++r) {
    const std::vector<float> f = row_floats(all, vocab, static_cast<int>(r));
    check_row(o, static_cast<int>(r), f, sample_reference(f, in[r].p), "crowded");
    EXPECT_EQ(o.route[r], crowds[r / 2].route) << "row " << r;
  }
}

TEST(SampleGpu, SameSeedAndCounterSameResultAtAnyBatchPosition) {
  std::mt19937_64 rng(601);
  const int vocab = kQwenVocab, rows = 64, stride = 8;
  std::vector<RowIn> probes(6);
  probes[0].p.temperature = 0.9f;
  probes[1].p.top_k = 50;
  probes[1].p.top_p = 0.9f;
  probes[1].p.n_logprobs = 20;
  probes[2].p.min_p = 0.05f;
  probes[3].p.top_k = 4000;  // fallback
  probes[4].p.temperature = 0.0f;
  probes[4].p.repetition = 1.5f;
  probes[4].p.history = {1, 2, 3};
  probes[5].p.top_p = 0.6f;
  probes[5].p.frequency = 0.5f;
  probes[5].p.history = {9, 9, 10};
  probes[5].p.n_logprobs = 3;
  std::vector<std::vector<bf16_bits>> probe_rows;
  for (size_t k = 0; k < probes.size(); ++k) {
    probes[k].p.seed = 1000 + static_cast<int64_t>(k);
    probes[k].p.counter = 12345 + static_cast<int64_t>(k);
    probe_rows.push_back(llm_row(rng, vocab));
  }
  // the batch: random rows with other settings, each probe at two positions
  std::vector<RowIn> in(rows);
  std::vector<bf16_bits> logits;
  std::vector<int> where(rows, -1);
  for (size_t k = 0; k < probes.size(); ++k) {
    where[3 + 7 * k] = static_cast<int>(k);
    where[rows - 1 - 4 * k] = static_cast<int>(k);
  }
  for (int r = 0; r < rows; ++r) {
    if (where[r] >= 0) {
      in[r] = probes[where[r]];
      logits.insert(logits.end(), probe_rows[where[r]].begin(), probe_rows[where[r]].end());
    } else {
      in[r].p.temperature = 0.5f + 0.01f * r;
      in[r].p.top_k = r % 3 == 0 ? 10 + r : 0;
      in[r].p.top_p = r % 4 == 1 ? 0.8f : 1.0f;
      in[r].p.n_logprobs = r % 5;
      in[r].p.seed = r;
      in[r].p.counter = 12345;
      const auto one = llm_row(rng, vocab);
      logits.insert(logits.end(), one.begin(), one.end());
    }
  }
  for (int r = 0; r < rows; ++r) in[r].p = center_decisions(row_floats(logits, vocab, r), in[r].p);
  for (size_t k = 0; k < probes.size(); ++k) {
    std::vector<float> pf(probe_rows[k].size());
    for (size_t i = 0; i < pf.size(); ++i) pf[i] = bf16_to_float(probe_rows[k][i]);
    probes[k].p = center_decisions(pf, probes[k].p);
  }
  for (int r = 0; r < rows; ++r)
    if (where[r] >= 0) in[r] = probes[where[r]];
  Sampler s;
  const Outputs batch = s.run(logits, vocab, in, stride);
  const Outputs again = s.run(logits, vocab, in, stride);
  EXPECT_EQ(batch.tokens, again.tokens);
  EXPECT_EQ(batch.top_ids, again.top_ids);
  for (size_t i = 0; i < batch.logprobs.size(); ++i) ASSERT_TRUE(same_bits(batch.logprobs[i], again.logprobs[i])) << i;
  for (size_t k = 0; k < probes.size(); ++k) {
    const Outputs alone = s.run(probe_rows[k], vocab, {probes[k]}, stride);
    for (int r = 0; r < rows; ++r) {
      if (where[r] != static_cast<int>(k)) continue;
      SCOPED_TRACE("probe " + std::to_string(k) + " at row " + std::to_string(r));
      EXPECT_EQ(batch.tokens[r], alone.tokens[0]);
      for (int j = 0; j < kLp; ++j)
        EXPECT_TRUE(same_bits(batch.logprobs[static_cast<size_t>(r) * kLp + j], alone.logprobs[j])) << j;
      for (int j = 0; j < kTop; ++j) EXPECT_EQ(batch.top_ids[static_cast<size_t>(r) * kTop + j], alone.top_ids[j]);
    }
    std::vector<float> pf(probe_rows[k].size());
    for (size_t i = 0; i < pf.size(); ++i) pf[i] = bf16_to_float(probe_rows[k][i]);
    check_row(alone, 0, pf, sample_reference(pf, probes[k].p), "probe " + std::to_string(k));
  }
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> f = row_floats(logits, vocab, r);
    check_row(batch, r, f, sample_reference(f, in[r].p), "batch");
  }
}

}  // namespace
}  // namespace kern_gpu_test
