#include "sample_launch.hpp"

#include <stdexcept>

#include "sample_layout.cuh"

namespace kern_gpu_test {

SampleOp::SampleOp(int vocab, int max_rows)
    : fb_("sample"),
      vocab_(vocab),
      max_rows_(max_rows),
      chunks_(static_cast<int>(kern_sample::race_chunks(vocab))),
      parts_(static_cast<size_t>(max_rows) * chunks_ * kern_sample::kRaceWords),
      arrivals_(static_cast<size_t>(max_rows)),
      route_(static_cast<size_t>(max_rows)) {
  check_cuda(cudaMemset(arrivals_.get(), 0, arrivals_.bytes()), "cudaMemset arrivals");  // as the carry buffer is at load
  fb_.set_dynamic_shared("kern_sample_bf16", static_cast<int>(kern_sample::shared_bytes(vocab)));
}

void SampleOp::enqueue(cudaStream_t stream, const Args& a, Path path) {
  if (a.rows > max_rows_) throw std::runtime_error("SampleOp: more rows than allocated");
  if (path != Path::ClusterOnly) {
    fb_.enqueue("kern_sample_race_bf16", stream, dim3(chunks_, a.rows), dim3(kern_sample::kRaceThreads), a.logits,
                a.fparams, a.iparams, a.history, a.tokens, a.logprobs, a.top_ids, parts_.get(), arrivals_.get(), route_.get(),
                a.rows, vocab_, a.history_stride);
    fb_.enqueue("kern_sample_rank_bf16", stream, dim3(1, a.rows), dim3(kern_sample::kRaceThreads), a.logits,
                a.fparams, a.iparams, a.history, a.tokens, a.logprobs, a.top_ids, parts_.get(), arrivals_.get(), route_.get(),
                a.rows, vocab_, a.history_stride);
  } else {
    check_cuda(cudaMemsetAsync(route_.get(), 0, route_.bytes(), stream), "cudaMemsetAsync route");
  }
  if (path == Path::RaceOnly) return;
  fb_.enqueue("kern_sample_bf16", stream, dim3(kern_sample::kCluster, a.rows), dim3(kern_sample::kThreads), a.logits,
              a.fparams, a.iparams, a.history, a.tokens, a.logprobs, a.top_ids, static_cast<const int32_t*>(route_.get()),
              a.rows, vocab_, a.history_stride);
}

std::vector<int32_t> SampleOp::route(int rows) const {
  std::vector<int32_t> all = route_.download();
  all.resize(static_cast<size_t>(rows));
  return all;
}

}  // namespace kern_gpu_test
