// Pure: whether a collective extern's count fits the buffers it reads and writes (the runtime checks
// every launch at its vars before NCCL sees it: NCCL itself would read and write past them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kern/cuda/nccl.hpp"

namespace kern::runtime {

// The elements each side of collective `c` touches for `count` over `ranks` members (the catalogue's
// meaning of count, docs/manifest.md): allreduce count / count, allgather count / count·ranks,
// reducescatter count·ranks / count, alltoall count·ranks / count·ranks. A problem names which side
// is short; nullopt when both fit (a product that overflows never fits).
std::optional<std::string> collective_count_problem(cuda::NcclCollective c, std::uint64_t count, std::uint64_t ranks,
                                                    std::uint64_t elem_bytes, std::uint64_t send_bytes,
                                                    std::uint64_t recv_bytes);

}  // namespace kern::runtime
