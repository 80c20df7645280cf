// Modules, functions and their parameter layouts.
#include <utility>

#include "cuda/driver_api.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/base/error.hpp"

namespace kern::cuda {
using detail::api;

Module Module::load(std::span<const std::byte> image, std::string_view what) {
  Module m;
  CUmodule h = nullptr;
  detail::check_while(api().cuModuleLoadData(&h, image.data()), "cuModuleLoadData", ErrorKind::KernelArtifact,
                      "loading {}", what);
  m.m_ = h;
  return m;
}

Module::~Module() {
  if (m_) detail::warn_if_failed(api().cuModuleUnload(static_cast<CUmodule>(m_)), "cuModuleUnload");
}

Module::Module(Module&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    if (m_) detail::warn_if_failed(api().cuModuleUnload(static_cast<CUmodule>(m_)), "cuModuleUnload");
    m_ = std::exchange(o.m_, nullptr);
  }
  return *this;
}

std::optional<Function> Module::function(const std::string& entry) const {
  CUfunction f = nullptr;
  CUresult r = api().cuModuleGetFunction(&f, static_cast<CUmodule>(m_), entry.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) return std::nullopt;
  detail::check(r, "cuModuleGetFunction");
  return Function(f);
}

std::vector<ParamInfo> Function::param_info() const {
  std::vector<ParamInfo> out;
  for (std::size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    CUresult r = api().cuFuncGetParamInfo(static_cast<CUfunction>(f_), i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
    detail::check(r, "cuFuncGetParamInfo");
    out.push_back({offset, size});
    if (i > 4096) fail(ErrorKind::KernelArtifact, "cuFuncGetParamInfo reports more than 4096 parameters");
  }
  return out;
}

void Function::set_max_dynamic_shared(std::uint32_t bytes) const {
  KERN_CU(cuFuncSetAttribute, static_cast<CUfunction>(f_), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
          static_cast<int>(bytes));
}

int Function::max_active_blocks_per_sm(std::uint32_t block_threads, std::uint32_t dynamic_shared) const {
  int blocks = 0;
  KERN_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks, static_cast<CUfunction>(f_),
          static_cast<int>(block_threads), static_cast<std::size_t>(dynamic_shared));
  return blocks;
}

}  // namespace kern::cuda
