// NCCL for the runtime's collective externs (issue 20): libnccl.so.2 opened with dlopen at first
// use like the rest of CUDA (nothing links it), communicators, and the four collectives on a
// stream (capturable into CUDA graphs). Errors: Nccl naming the call and NCCL's own words; Driver
// when the library cannot be loaded. No NCCL type appears here.
//
// Before the first communicator: NCCL_NVLS_ENABLE=0 always (NVLink multicast must never run on the
// lent machines) and NCCL_RUNTIME_CONNECT=0 unless the caller set it (lazy connects inside graph
// capture fail).
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "kern/base/dtype.hpp"
#include "kern/cuda/cuda.hpp"

namespace kern::cuda {

using NcclId = std::array<std::uint8_t, 128>;

enum class NcclCollective : std::uint8_t { AllReduce, AllGather, ReduceScatter, AllToAll };

// Sets the environment above (idempotent); every init calls it.
void nccl_environment();
// A fresh unique id (ncclGetUniqueId): the group's index-0 rank makes it and offers it.
NcclId nccl_unique_id();
// NCCL's version code (e.g. 22809 for 2.28.9).
int nccl_version();

class NcclComm {
 public:
  NcclComm() = default;
  // ncclCommInitRank on the current context's device. Blocks until every rank of the communicator
  // has called it: ranks initialised from one thread go inside nccl_group.
  static NcclComm init(int ranks, const NcclId& id, int rank);
  ~NcclComm();
  NcclComm(NcclComm&& o) noexcept;
  NcclComm& operator=(NcclComm&& o) noexcept;
  int ranks() const { return ranks_; }
  // `count` as the catalogue states it (docs/manifest.md): the elements of each rank's send
  // (allreduce), of each rank's part (allgather, reducescatter), of each block exchanged with one
  // peer (alltoall: grouped ncclSend / ncclRecv of `count` elements per peer, in rank order).
  // Reductions sum. dtype: f32, bf16, i32 or u8.
  void collective(NcclCollective c, DevicePtr send, DevicePtr recv, std::uint64_t count, DType dtype,
                  const Stream& s) const;

 private:
  void* comm_ = nullptr;
  int ranks_ = 0;
};

// Runs `f` between ncclGroupStart and ncclGroupEnd (several ranks' inits from one thread).
void nccl_group(const std::function<void()>& f);

}  // namespace kern::cuda
