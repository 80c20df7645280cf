// The sampling op as kern gen's manifest runs it (src/models/qwen3/gen_ops.cpp: the race kernel,
// the rank kernel for the ranking rows, then the cluster kernel for the rows they left), for the
// GPU tests and the timing; or the cluster kernel alone (every row routed to it), so that its own
// paths stay tested for every setting; or the race and rank kernels alone (timing).
#pragma once

#include <cstdint>

#include "harness.hpp"

namespace kern_gpu_test {

class SampleOp {
 public:
  enum class Path { Op, ClusterOnly, RaceOnly };  // RaceOnly: race + rank, for timing (rows they leave get no token)
  SampleOp(int vocab, int max_rows);

  struct Args {
    const bf16_bits* logits;
    const float* fparams;
    const int64_t* iparams;
    const int32_t* history;
    int64_t* tokens;
    float* logprobs;
    int32_t* top_ids;
    int rows, history_stride;
  };
  // Enqueues the op on `stream` (no synchronisation).
  void enqueue(cudaStream_t stream, const Args& a, Path path = Path::Op);
  // The route the last launch left: 1 where the race kernel took the row.
  std::vector<int32_t> route(int rows) const;

 private:
  Fatbin fb_;
  int vocab_, max_rows_, chunks_;
  Device<float> parts_;
  Device<int32_t> arrivals_, route_;
};

}  // namespace kern_gpu_test
