#include "kern/core/externs.hpp"

#include <algorithm>

namespace kern::core {
namespace {

constexpr std::string_view kGemmArgs = "a, w, c, m, n, k [, ldc [, a_row_stride]]";
constexpr std::string_view kGemmF32Args = "a, w, c, m, n, k [, ldc]";
constexpr std::string_view kFp8Args = "a, w, c, a_scale, w_scale, m, n, k [, ldc]";

ExternSpec gemm(std::string name, ExternSpec::Library library, DType in, DType out, bool accumulate, std::size_t scales,
                std::size_t max_args, std::string_view signature) {
  ExternSpec s;
  s.name = std::move(name);
  s.library = library;
  s.in = in;
  s.out = out;
  s.accumulate = accumulate;
  s.scales = scales;
  s.min_args = 6 + scales;
  s.max_args = max_args;
  // cuBLASLt GEMMs take the runtime's row-invariant algorithm choice and a pinned `algo`.
  s.takes_algo = library == ExternSpec::Library::CublasLt;
  // FP8 tensor-core GEMMs need k in whole 16-byte rows.
  s.k_multiple = in == DType::FP8E4M3 ? 16 : 1;
  s.in_runtime = true;
  s.signature = signature;
  return s;
}

std::vector<ExternSpec> catalogue() {
  constexpr ExternSpec::Library Lt = ExternSpec::Library::CublasLt;
  std::vector<ExternSpec> out = {
      gemm("cublaslt_bf16_tn", Lt, DType::BF16, DType::BF16, false, 0, 8, kGemmArgs),
      gemm("cublaslt_bf16_tn_acc", Lt, DType::BF16, DType::BF16, true, 0, 8, kGemmArgs),
      gemm("cublas_bf16_tn_f32", ExternSpec::Library::Cublas, DType::BF16, DType::F32, false, 0, 7, kGemmF32Args),
      gemm("cublaslt_fp8_tn", Lt, DType::FP8E4M3, DType::BF16, false, 2, 9, kFp8Args),
      gemm("cublaslt_fp8_tn_f32", Lt, DType::FP8E4M3, DType::F32, false, 2, 9, kFp8Args),
  };
  for (std::string_view coll : {"allreduce", "allgather", "reducescatter", "alltoall"})
    for (DType dt : {DType::F32, DType::BF16, DType::I32, DType::U8}) {
      ExternSpec s;
      s.name = "nccl_" + std::string(coll) + "_" + std::string(manifest_name(dt));
      s.family = ExternSpec::Family::Collective;
      s.library = ExternSpec::Library::Nccl;
      s.in = s.out = dt;
      s.min_args = s.max_args = 4;
      s.collective = coll;
      s.signature = "send, recv, count, rank";
      s.in_runtime = true;  // NCCL, one communicator per topology group (docs/multi-gpu-handles.md)
      out.push_back(std::move(s));
    }
  return out;
}

}  // namespace

const std::vector<ExternSpec>& externs() {
  static const std::vector<ExternSpec> all = catalogue();
  return all;
}

const ExternSpec* find_extern(std::string_view name) {
  const auto& all = externs();
  auto it = std::find_if(all.begin(), all.end(), [name](const ExternSpec& s) { return s.name == name; });
  return it == all.end() ? nullptr : &*it;
}

}  // namespace kern::core
