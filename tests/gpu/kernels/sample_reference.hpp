// The float64 reference of kernels/sample.cu (kern_sample_bf16), plain C++ (no CUDA): the exact
// filtered sampling distribution of one row, its greedy token, the raw log-softmax and top-n ids;
// and the chi-square goodness-of-fit test the GPU tests run against it. Its own tests run on the
// CPU (tests/host/kernels/sample_reference_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kern_sample_ref {

constexpr int kMaxLogprobs = 20;

// One row's parameters as the kernel reads them (fparams / iparams), history = its first
// history_len ids.
struct SampleParams {
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f, repetition = 1.0f, presence = 0.0f, frequency = 0.0f;
  int64_t top_k = 0, seed = 0, counter = 0, n_logprobs = 0;
  std::vector<int32_t> history;
  // logit bias (sampling_keys[5] = its size; the pairs at the end of the history row): added to the
  // raw logit before the penalties; ids unique (the host merges them), ids outside [0, vocab) and
  // non-finite values ignored
  std::vector<std::pair<int32_t, float>> bias;
};

struct SampleReference {
  bool greedy = false;       // temperature NaN or <= 0, or no finite scaled logit: the token is greedy_token
  int64_t greedy_token = 0;  // argmax of the penalized logits, ties to the lowest index, NaN ignored (0 if none)
  std::vector<double> probs;     // the sampling distribution (one entry per token; one-hot when greedy)
  std::vector<double> logprobs;  // log_softmax of the raw logits (NaN logits ignored in the normaliser)
  std::vector<int32_t> top_ids;  // the n_logprobs largest raw logits, descending, ties to the lower id
  int n_logprobs = 0;            // clamped to [0, min(20, vocab)]
};

// The semantics of kern_sample_bf16 (kernels/sample.cu's header) in float64, with the kernel's
// parameter sanitising (the logit bias as SampleParams::bias says):
// repetition NaN / <= 0 / inf -> 1, presence / frequency non-finite -> 0,
// top_k off unless 0 < top_k < vocab, top_p off unless < 1, min_p off unless > 0 (clamped to 1),
// history ids outside [0, vocab) ignored, scaled logits NaN -> -inf and clamped to <= FLT_MAX.
SampleReference sample_reference(const std::vector<float>& logits, const SampleParams& p);

// Upper tail P(X >= x) of the chi-square distribution with df degrees of freedom.
double chi2_pvalue(double x, int df);

struct ChiSquare {
  double statistic = 0.0;
  int df = 0;
  double pvalue = 1.0;
  int64_t impossible = 0;  // draws of tokens with probability 0
  std::string describe() const;
};
// Pearson's test of `counts` (draws per token, `draws` in all) against `probs`: tokens taken in
// descending probability, consecutive ones merged until a bin expects >= 5 draws (a last short bin
// joins the one before); tokens of probability 0 form no bin, and any draw of one is `impossible`.
ChiSquare chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t draws);

}  // namespace kern_sample_ref
