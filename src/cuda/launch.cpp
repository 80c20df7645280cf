// Kernel launches, tensor-map encoding and graphs.
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <utility>

#include "cuda/driver_api.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/base/error.hpp"

namespace kern::cuda {
using detail::api;

using detail::raw;

void launch(const Function& f, const LaunchGeometry& g, void** params, const Stream& s) {
  if (!g.cluster && !g.pdl) {
    KERN_CU(cuLaunchKernel, static_cast<CUfunction>(f.handle()), g.grid[0], g.grid[1], g.grid[2], g.block[0],
            g.block[1], g.block[2], g.shared_mem, raw(s), params, nullptr);
    return;
  }
  CUlaunchAttribute attrs[2];
  unsigned n = 0;
  if (g.cluster) {
    attrs[n] = CUlaunchAttribute{};
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = (*g.cluster)[0];
    attrs[n].value.clusterDim.y = (*g.cluster)[1];
    attrs[n].value.clusterDim.z = (*g.cluster)[2];
    ++n;
  }
  if (g.pdl) {
    attrs[n] = CUlaunchAttribute{};
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  CUlaunchConfig cfg{};
  cfg.gridDimX = g.grid[0];
  cfg.gridDimY = g.grid[1];
  cfg.gridDimZ = g.grid[2];
  cfg.blockDimX = g.block[0];
  cfg.blockDimY = g.block[1];
  cfg.blockDimZ = g.block[2];
  cfg.sharedMemBytes = g.shared_mem;
  cfg.hStream = raw(s);
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  KERN_CU(cuLaunchKernelEx, &cfg, static_cast<CUfunction>(f.handle()), params, nullptr);
}

namespace {

// The driver's value for a tensormap option's manifest value (bytes); Error(Manifest) for another.
template <class T>
T tensormap_option(std::initializer_list<std::pair<std::uint32_t, T>> table, std::uint32_t v, const char* what) {
  for (const auto& [bytes, option] : table)
    if (bytes == v) return option;
  fail(ErrorKind::Manifest, "tensormap {} {} unsupported", what, v);
}

}  // namespace

std::array<std::byte, 128> encode_tensormap_tiled(const TensormapSpec& t) {
  static constexpr CUtensorMapDataType kTypes[] = {
      CU_TENSOR_MAP_DATA_TYPE_UINT8,    CU_TENSOR_MAP_DATA_TYPE_UINT16,        CU_TENSOR_MAP_DATA_TYPE_UINT32,
      CU_TENSOR_MAP_DATA_TYPE_INT32,    CU_TENSOR_MAP_DATA_TYPE_UINT64,        CU_TENSOR_MAP_DATA_TYPE_INT64,
      CU_TENSOR_MAP_DATA_TYPE_FLOAT16,  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,      CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
      CU_TENSOR_MAP_DATA_TYPE_TFLOAT32, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B,
  };
  if (t.dtype >= std::size(kTypes)) fail(ErrorKind::Manifest, "tensormap dtype {} unknown", t.dtype);
  const auto rank = static_cast<cuuint32_t>(t.dims.size());
  if (rank < 1 || rank > 5 || t.strides.size() + 1 != rank || t.box.size() != rank)
    fail(ErrorKind::Manifest, "tensormap of rank {} with {} strides and {} box entries", rank, t.strides.size(),
         t.box.size());
  const auto sw = tensormap_option<CUtensorMapSwizzle>({{0, CU_TENSOR_MAP_SWIZZLE_NONE},
                                                        {32, CU_TENSOR_MAP_SWIZZLE_32B},
                                                        {64, CU_TENSOR_MAP_SWIZZLE_64B},
                                                        {128, CU_TENSOR_MAP_SWIZZLE_128B}},
                                                       t.swizzle, "swizzle");
  const auto l2 = tensormap_option<CUtensorMapL2promotion>({{0, CU_TENSOR_MAP_L2_PROMOTION_NONE},
                                                            {64, CU_TENSOR_MAP_L2_PROMOTION_L2_64B},
                                                            {128, CU_TENSOR_MAP_L2_PROMOTION_L2_128B},
                                                            {256, CU_TENSOR_MAP_L2_PROMOTION_L2_256B}},
                                                           t.l2_promotion, "l2_promotion");
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], elem[5];
  for (cuuint32_t i = 0; i < rank; ++i) {
    dims[i] = t.dims[i];
    box[i] = t.box[i];
    elem[i] = 1;
    if (i + 1 < rank) strides[i] = t.strides[i];
  }
  CUtensorMap map;
  KERN_CU(cuTensorMapEncodeTiled, &map, kTypes[t.dtype], rank, reinterpret_cast<void*>(t.address), dims, strides, box,
          elem, CU_TENSOR_MAP_INTERLEAVE_NONE, sw, l2,
          t.oob_nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  static_assert(sizeof(CUtensorMap) == 128);
  std::array<std::byte, 128> out;
  std::memcpy(out.data(), &map, 128);
  return out;
}

Graph Graph::capture(const Stream& s, const std::function<void()>& body) {
  KERN_CU(cuStreamBeginCapture, raw(s), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  try {
    body();
  } catch (...) {
    CUgraph partial = nullptr;
    if (api().cuStreamEndCapture(raw(s), &partial) == CUDA_SUCCESS && partial) api().cuGraphDestroy(partial);
    throw;
  }
  CUgraph g = nullptr;
  KERN_CU(cuStreamEndCapture, raw(s), &g);
  Graph out;
  out.graph_ = g;
  CUgraphExec e = nullptr;
  KERN_CU(cuGraphInstantiate, &e, g, 0);
  out.exec_ = e;
  return out;
}

Graph::~Graph() {
  if (exec_) detail::warn_if_failed(api().cuGraphExecDestroy(static_cast<CUgraphExec>(exec_)), "cuGraphExecDestroy");
  if (graph_) detail::warn_if_failed(api().cuGraphDestroy(static_cast<CUgraph>(graph_)), "cuGraphDestroy");
}

Graph::Graph(Graph&& o) noexcept : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    Graph dead(std::move(*this));
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}

void Graph::launch(const Stream& s) const { KERN_CU(cuGraphLaunch, static_cast<CUgraphExec>(exec_), raw(s)); }

}  // namespace kern::cuda
