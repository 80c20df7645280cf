// NCCL through dlopen (include/kern/cuda/nccl.hpp).
#include "kern/cuda/nccl.hpp"

#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "cuda/driver_api.hpp"
#include "cuda/library_open.hpp"
#include "kern/base/error.hpp"

namespace kern::cuda {
namespace {

#define KERN_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)            \
  X(ncclGetUniqueId)           \
  X(ncclCommInitRank)          \
  X(ncclCommDestroy)           \
  X(ncclGetErrorString)        \
  X(ncclGetLastError)          \
  X(ncclAllReduce)             \
  X(ncclAllGather)             \
  X(ncclReduceScatter)         \
  X(ncclSend)                  \
  X(ncclRecv)                  \
  X(ncclGroupStart)            \
  X(ncclGroupEnd)

struct NcclApi {
#define KERN_NCCL_FIELD(name) decltype(&::name) name = nullptr;
  KERN_NCCL_FUNCTIONS(KERN_NCCL_FIELD)
#undef KERN_NCCL_FIELD
};

NcclApi load_nccl() {
  void* lib = detail::open_first_library({"libnccl.so.2", "libnccl.so"}, "NCCL");
  NcclApi a;
#define KERN_NCCL_LOAD(name)                                      \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(lib, #name)); \
  if (!a.name) fail(ErrorKind::Driver, "the loaded NCCL lacks {}", #name);
  KERN_NCCL_FUNCTIONS(KERN_NCCL_LOAD)
#undef KERN_NCCL_LOAD
  return a;
}

const NcclApi& nccl() { return detail::load_once<NcclApi>(load_nccl); }

void check(ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  const char* str = nccl().ncclGetErrorString(r);
  const char* last = nccl().ncclGetLastError(comm);
  fail(ErrorKind::Nccl, "{} failed: {} ({}){}{}", call, static_cast<int>(r), str ? str : "no description",
       last && *last ? ": " : "", last ? last : "");
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::I32: return ncclInt32;
    case DType::U8: return ncclUint8;
    default: fail(ErrorKind::Api, "NCCL: no collective of dtype {}", manifest_name(t));
  }
}

}  // namespace

void nccl_environment() {
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  ::setenv("NCCL_RUNTIME_CONNECT", "0", 0);
}

NcclId nccl_unique_id() {
  nccl_environment();
  ncclUniqueId id;
  check(nccl().ncclGetUniqueId(&id), "ncclGetUniqueId");
  static_assert(sizeof(id) == sizeof(NcclId));
  NcclId out;
  std::memcpy(out.data(), &id, sizeof id);
  return out;
}

int nccl_version() {
  int v = 0;
  check(nccl().ncclGetVersion(&v), "ncclGetVersion");
  return v;
}

NcclComm NcclComm::init(int ranks, const NcclId& id, int rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    fail(ErrorKind::Api, "NCCL: rank {} of a communicator of {}", rank, ranks);
  nccl_environment();
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof uid);
  NcclComm c;
  ncclComm_t comm = nullptr;
  check(nccl().ncclCommInitRank(&comm, ranks, uid, rank), "ncclCommInitRank");
  c.comm_ = comm;
  c.ranks_ = ranks;
  return c;
}

NcclComm::~NcclComm() {
  if (comm_) nccl().ncclCommDestroy(static_cast<ncclComm_t>(comm_));
}

NcclComm::NcclComm(NcclComm&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)), ranks_(std::exchange(o.ranks_, 0)) {}

NcclComm& NcclComm::operator=(NcclComm&& o) noexcept {
  if (this != &o) {
    if (comm_) nccl().ncclCommDestroy(static_cast<ncclComm_t>(comm_));
    comm_ = std::exchange(o.comm_, nullptr);
    ranks_ = std::exchange(o.ranks_, 0);
  }
  return *this;
}

void NcclComm::collective(NcclCollective c, DevicePtr send, DevicePtr recv, std::uint64_t count, DType dtype,
                          const Stream& s) const {
  if (!comm_) fail(ErrorKind::Api, "NCCL: a collective on a communicator never joined");
  auto comm = static_cast<ncclComm_t>(comm_);
  auto stream = static_cast<cudaStream_t>(s.handle());
  const ncclDataType_t t = nccl_type(dtype);
  const void* in = reinterpret_cast<const void*>(send);
  void* out = reinterpret_cast<void*>(recv);
  switch (c) {
    case NcclCollective::AllReduce:
      check(nccl().ncclAllReduce(in, out, count, t, ncclSum, comm, stream), "ncclAllReduce", comm);
      return;
    case NcclCollective::AllGather:
      check(nccl().ncclAllGather(in, out, count, t, comm, stream), "ncclAllGather", comm);
      return;
    case NcclCollective::ReduceScatter:
      check(nccl().ncclReduceScatter(in, out, count, t, ncclSum, comm, stream), "ncclReduceScatter", comm);
      return;
    case NcclCollective::AllToAll: {
      const std::uint64_t block = count * dtype_size(dtype);
      check(nccl().ncclGroupStart(), "ncclGroupStart");
      for (int p = 0; p < ranks_; ++p) {
        check(nccl().ncclSend(reinterpret_cast<const void*>(send + p * block), count, t, p, comm, stream), "ncclSend",
              comm);
        check(nccl().ncclRecv(reinterpret_cast<void*>(recv + p * block), count, t, p, comm, stream), "ncclRecv", comm);
      }
      check(nccl().ncclGroupEnd(), "ncclGroupEnd");
      return;
    }
  }
}

void nccl_group(const std::function<void()>& f) {
  nccl_environment();
  check(nccl().ncclGroupStart(), "ncclGroupStart");
  try {
    f();
  } catch (...) {
    nccl().ncclGroupEnd();
    throw;
  }
  check(nccl().ncclGroupEnd(), "ncclGroupEnd");
}

}  // namespace kern::cuda
