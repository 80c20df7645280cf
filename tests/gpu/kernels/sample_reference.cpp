#include "sample_reference.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace kern_sample_ref {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Indices sorted by value descending, ties to the lower index, NaN last.
std::vector<int32_t> descending(const std::vector<double>& v) {
  std::vector<int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    const bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
    if (na || nb) return !na && nb;
    return v[a] > v[b];
  });
  return idx;
}

}  // namespace

SampleReference sample_reference(const std::vector<float>& logits, const SampleParams& p) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  SampleReference out;
  // parameters, as the kernel sanitises them
  const double temperature = p.temperature;
  double repetition = p.repetition, presence = p.presence, frequency = p.frequency;
  if (!(repetition > 0.0) || !std::isfinite(repetition)) repetition = 1.0;
  if (!std::isfinite(presence)) presence = 0.0;
  if (!std::isfinite(frequency)) frequency = 0.0;
  const bool use_topk = p.top_k > 0 && p.top_k < vocab;
  const bool use_topp = p.top_p < 1.0f;
  const bool use_minp = p.min_p > 0.0f;
  const double min_p = std::min(static_cast<double>(p.min_p), 1.0);
  out.n_logprobs = static_cast<int>(std::clamp<int64_t>(p.n_logprobs, 0, std::min<int64_t>(kMaxLogprobs, vocab)));

  // penalties
  std::vector<int64_t> count(logits.size(), 0);
  for (int32_t id : p.history)
    if (id >= 0 && id < vocab) ++count[id];
  std::vector<double> bias(logits.size(), 0.0);
  for (const auto& [id, b] : p.bias)
    if (id >= 0 && id < vocab && std::isfinite(b)) bias[id] = b;
  std::vector<double> x(logits.size());
  for (int64_t i = 0; i < vocab; ++i) {
    double v = static_cast<double>(logits[i]) + bias[i];
    if (count[i] > 0) {
      v = v > 0.0 ? v / repetition : v * repetition;
      v -= frequency * static_cast<double>(count[i]) + presence;
    }
    x[i] = v;
  }
  // greedy token
  out.greedy_token = 0;
  {
    int64_t best = -1;
    for (int64_t i = 0; i < vocab; ++i)
      if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
    if (best >= 0) out.greedy_token = best;
  }
  // raw log-softmax and top-n
  {
    std::vector<double> raw(logits.begin(), logits.end());
    double m = -kInf;
    for (double v : raw)
      if (!std::isnan(v)) m = std::max(m, v);
    double s = 0.0;
    for (double v : raw)
      if (!std::isnan(v)) s += std::exp(v - m);
    const double log_z = m + std::log(s);
    out.logprobs.resize(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) out.logprobs[i] = raw[i] - log_z;
    const std::vector<int32_t> order = descending(raw);
    out.top_ids.assign(order.begin(), order.begin() + out.n_logprobs);
  }
  out.probs.assign(logits.size(), 0.0);
  out.greedy = !(temperature > 0.0);
  std::vector<double> l(logits.size());
  double lmax = -kInf;
  if (!out.greedy) {
    const double t = std::min(temperature, static_cast<double>(FLT_MAX));
    for (int64_t i = 0; i < vocab; ++i) {
      double v = x[i] / t;
      v = std::isnan(v) ? -kInf : std::min(v, static_cast<double>(FLT_MAX));
      l[i] = v;
      lmax = std::max(lmax, v);
    }
    if (lmax == -kInf) out.greedy = true;
  }
  if (out.greedy) {
    out.probs[out.greedy_token] = 1.0;
    return out;
  }
  std::vector<double> e(logits.size());
  for (int64_t i = 0; i < vocab; ++i) e[i] = std::exp(l[i] - lmax);
  const std::vector<int32_t> order = descending(l);
  double threshold = -kInf;  // kept: l >= threshold
  double zk = 0.0;
  if (use_topk) {
    threshold = l[order[p.top_k - 1]];
    for (int64_t i = 0; i < vocab; ++i)
      if (l[i] >= threshold) zk += e[i];
  } else {
    for (double v : e) zk += v;
  }
  if (use_topp) {
    const double target = static_cast<double>(p.top_p) * zk;
    double cum = 0.0, tp = threshold;
    for (int32_t i : order) {
      if (l[i] < threshold) break;
      cum += e[i];
      if (cum >= target) {
        tp = l[i];
        break;
      }
    }
    threshold = std::max(threshold, tp);
  }
  if (use_minp) threshold = std::max(threshold, lmax + std::log(min_p));
  double z = 0.0;
  for (int64_t i = 0; i < vocab; ++i)
    if (l[i] >= threshold) z += e[i];
  for (int64_t i = 0; i < vocab; ++i) out.probs[i] = l[i] >= threshold ? e[i] / z : 0.0;
  return out;
}

double chi2_pvalue(double x, int df) {
  if (df <= 0) return 1.0;
  if (!(x > 0.0)) return 1.0;
  // Q(a, y), the regularised upper incomplete gamma function, a = df / 2, y = x / 2
  const double a = 0.5 * df, y = 0.5 * x;
  const double lg = std::lgamma(a);
  if (y < a + 1.0) {  // series for P(a, y)
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000; ++n) {
      term *= y / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
    }
    return std::max(0.0, 1.0 - sum * std::exp(-y + a * std::log(y) - lg));
  }
  // continued fraction for Q(a, y) (modified Lentz)
  const double tiny = 1e-300;
  double b = y + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(-y + a * std::log(y) - lg) * h;
}

std::string ChiSquare::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "chi2 %.2f, df %d, p %.3g, impossible draws %lld", statistic, df, pvalue,
                static_cast<long long>(impossible));
  return buf;
}

ChiSquare chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t draws) {
  ChiSquare r;
  std::vector<int32_t> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
  std::vector<double> expected, observed;
  double e = 0.0, o = 0.0;
  for (int32_t i : order) {
    if (probs[i] <= 0.0) {
      r.impossible += counts[i];
      continue;
    }
    e += probs[i] * static_cast<double>(draws);
    o += static_cast<double>(counts[i]);
    if (e >= 5.0) {
      expected.push_back(e);
      observed.push_back(o);
      e = o = 0.0;
    }
  }
  if (e > 0.0 || o > 0.0) {
    if (expected.empty()) {
      expected.push_back(e);
      observed.push_back(o);
    } else {
      expected.back() += e;
      observed.back() += o;
    }
  }
  for (size_t b = 0; b < expected.size(); ++b) {
    const double d = observed[b] - expected[b];
    r.statistic += d * d / expected[b];
  }
  r.df = static_cast<int>(expected.size()) - 1;
  r.pvalue = chi2_pvalue(r.statistic, r.df);
  return r;
}

}  // namespace kern_sample_ref
