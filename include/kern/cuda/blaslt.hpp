// cuBLASLt through dlopen (libcublasLt.so.13, falling back to .so / .so.12): the GEMM
// behind the `extern:cublaslt_bf16_tn[_acc]` and `extern:cublaslt_fp8_tn[_f32]` launches.
//
// Row-major C[m,n] = A[m,k] · W[n,k]ᵀ (f32 compute), mapped onto cuBLASLt's column-major form
// as Cᵀ[n,m] = op_T(W)·Aᵀ with transa = T (the TN layout FP8 needs on Hopper): bf16 in and out,
// or e4m3 in with bf16 / f32 out and per-tensor f32 scales. One handle and one 32 MiB workspace
// per object; the algorithm is chosen once per (types, m_ref, n, k, strides) and cached, so a
// launch does no host synchronisation and can be captured into a graph.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kern/base/dtype.hpp"
#include "kern/cuda/cuda.hpp"

namespace kern::cuda {

// A cuBLASLt algorithm configuration (the manifest's `algo`): cublasLtMatmulAlgoInit(id) plus
// the config attributes of the same names.
struct GemmAlgo {
  std::int64_t id = 0, tile = 0, stages = 0, split_k = 1, reduction = 0, swizzle = 0, custom = 0, inner_shape = 0,
               cluster_shape = 0;
  auto operator<=>(const GemmAlgo&) const = default;
};

struct GemmShape {
  // Operand types: bf16 -> bf16, or fp8e4m3 -> bf16 / f32 (the catalogue's in / out).
  DType in = DType::BF16, out = DType::BF16;
  std::uint64_t m = 0, n = 0, k = 0;
  std::uint64_t lda = 0;    // A row stride in elements (>= k)
  std::uint64_t ldc = 0;    // C row stride in elements (>= n)
  bool accumulate = false;  // beta = 1
  // Row invariance: the algorithm is chosen once, at m = m_ref (the launch's m at the var bounds),
  // and used for every m of that launch, so a row's result does not depend on how many rows
  // share the call (chunked prefill gives the same bits for any chunk size). 0 = choose at m.
  std::uint64_t m_ref = 0;
  // Which of the heuristic's answers at m_ref that also run at m = 1 (0: its first). Past the last
  // such answer: the first, with a warning, or Error(Blas) when strict_candidate (the GPU sweep).
  std::uint32_t candidate = 0;
  bool strict_candidate = false;
  std::optional<GemmAlgo> algo;  // pinned by the manifest: used as given, checked at every m
  // bf16 only, not with `algo`: at each m, run the fastest (timed on the probe) of the launch's one
  // algorithm and the heuristic's answers at that m before it in its list that compute the same
  // bits as it, checked once per (shape, m) on a probe (random A, the launch's own W, random C where
  // it accumulates) when prepare() is given the operands; otherwise the launch's one algorithm. A
  // row's bits still do not depend on the rows beside it (docs/runtime.md, "GEMM algorithm choice").
  bool per_m_equivalent = false;
};

// The device addresses of one GEMM. FP8: a_scale and w_scale point at one f32 each, the factors
// the stored e4m3 values are multiplied by (C = (a_scale·A)·(w_scale·W)ᵀ).
struct GemmOperands {
  DevicePtr a = 0, w = 0, c = 0;
  DevicePtr a_scale = 0, w_scale = 0;
};

class BlasLt {
 public:
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;
  // FP8: A, W, C and both scale pointers must be multiples of this (cuBLAS documents 16-byte
  // aligned matrix pointers for its FP8 kernels; kern holds the scales to the same rule, and the
  // heuristic and the checks see scale pointers aligned to exactly this). gemm() refuses others
  // (Error(Api)) before anything is enqueued; the runtime refuses them at load.
  static constexpr std::uint64_t kFp8Alignment = 16;
  BlasLt();  // Error(Driver) when libcublasLt cannot be loaded
  ~BlasLt();
  BlasLt(const BlasLt&) = delete;
  BlasLt& operator=(const BlasLt&) = delete;

  // Enqueues the GEMM on `s`. m, n or k = 0 is a no-op. Error(Blas) naming the call, the shape,
  // the algorithm and the addresses; Error(Api) for a type pair it does not run, an FP8 GEMM
  // without both scales or with an operand not kFp8Alignment-aligned.
  void gemm(const GemmShape& shape, const GemmOperands& ops, const Stream& s);
  // The bf16 GEMM (shape.in / out bf16).
  void gemm_bf16_tn(const GemmShape& shape, DevicePtr a, DevicePtr w, DevicePtr c, const Stream& s) {
    gemm(shape, GemmOperands{a, w, c}, s);
  }
  // Queries and caches the algorithm for `shape` now (off the launch path, outside capture).
  void prepare(const GemmShape& shape);
  // The same, and for a per_m_equivalent shape the search for an equivalent faster answer at
  // shape.m, whose probe reads ops.w (the launch's weights) and runs on a stream of its own.
  // Synchronous; device memory for the probe that cannot be had leaves the launch's one algorithm
  // (with a warning).
  void prepare(const GemmShape& shape, const GemmOperands& ops);
  std::size_t cached_plans() const;

  // The chosen configuration for `shape` as text (id, tile, stages, split_k, ...), for reports.
  std::string describe(const GemmShape& shape);
  // What runs at shape.m (the launch's one algorithm, or the equivalent answer a per_m_equivalent
  // search found), as describe() writes it.
  std::string describe_at_m(const GemmShape& shape);

 private:
  struct Plan;
  struct Choice;
  using ChoiceKey = std::tuple<DType, DType, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t,
                               bool, std::optional<GemmAlgo>, std::uint32_t, bool>;
  using PlanKey = std::tuple<std::uint64_t, bool, ChoiceKey>;  // m, per_m_equivalent, the choice
  static ChoiceKey choice_key(const GemmShape& s);
  const Choice& choice(const GemmShape& shape);
  Plan& plan(const GemmShape& shape);
  void find_equivalent(const GemmShape& shape, Plan& plan, const GemmOperands& ops);
  struct Probe;
  Probe make_probe(const GemmShape& shape);
  void probe_launch(const GemmShape& shape, const Plan& plan, const void* algo, const GemmOperands& ops,
                    const Probe& probe);
  std::vector<std::uint16_t> probe_output(const GemmShape& shape, const Plan& plan, const void* algo,
                                          const GemmOperands& ops, const Probe& probe);
  float probe_time_us(const GemmShape& shape, const Plan& plan, const void* algo, const GemmOperands& ops,
                      const Probe& probe);
  DevicePtr scale_stand_in() const;  // inside the workspace, aligned to exactly kFp8Alignment
  void* handle_ = nullptr;
  DeviceMemory workspace_;
  std::map<ChoiceKey, std::unique_ptr<Choice>> choices_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  std::unique_ptr<Stream> probe_stream_;  // per_m_equivalent probes, created at the first
  DeviceMemory probe_workspace_;          // (the launches' workspace may be in use on their stream)
};

}  // namespace kern::cuda
