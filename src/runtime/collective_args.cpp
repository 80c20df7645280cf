// Pure: a collective's count against its buffers (collective_args.hpp).
#include "runtime/collective_args.hpp"

#include <fmt/format.h>

namespace kern::runtime {
namespace {

// Bytes of `elems` elements of `elem_bytes`, nullopt on overflow.
std::optional<std::uint64_t> bytes_of(std::uint64_t elems, std::uint64_t elem_bytes) {
  std::uint64_t b = 0;
  if (__builtin_mul_overflow(elems, elem_bytes, &b)) return std::nullopt;
  return b;
}

std::optional<std::string> side(const char* name, std::uint64_t count, std::uint64_t times, std::uint64_t elem_bytes,
                                std::uint64_t have) {
  std::uint64_t elems = 0;
  std::optional<std::uint64_t> need;
  if (!__builtin_mul_overflow(count, times, &elems)) need = bytes_of(elems, elem_bytes);
  if (need && *need <= have) return std::nullopt;
  return fmt::format("{} holds {} bytes; count {} x {} of {}-byte elements needs {}", name, have, count,
                     times == 1 ? std::string("1") : fmt::format("{} ranks", times), elem_bytes,
                     need ? fmt::format("{} bytes", *need) : std::string("more than 2^64 bytes"));
}

}  // namespace

std::optional<std::string> collective_count_problem(cuda::NcclCollective c, std::uint64_t count, std::uint64_t ranks,
                                                    std::uint64_t elem_bytes, std::uint64_t send_bytes,
                                                    std::uint64_t recv_bytes) {
  const bool send_all = c == cuda::NcclCollective::ReduceScatter || c == cuda::NcclCollective::AllToAll;
  const bool recv_all = c == cuda::NcclCollective::AllGather || c == cuda::NcclCollective::AllToAll;
  if (auto p = side("send", count, send_all ? ranks : 1, elem_bytes, send_bytes)) return p;
  return side("recv", count, recv_all ? ranks : 1, elem_bytes, recv_bytes);
}

}  // namespace kern::runtime
