// The second process of PoolShareGpu (pool_share_gpu_test.cpp): connects to the owner's socket,
// maps its pool through the POSIX fds that arrive (runtime::PoolView), prints the bytes of
// [offset, offset + bytes) of a state in hex on stdout, then writes `bytes` bytes of the pattern
// byte = (i * 7 + seed) & 255 at `write_offset` for the owner to read back. Exit status 0, or 1 with
// the error on stderr.
//   pool_share_peer SOCKET STATE OFFSET BYTES WRITE_OFFSET SEED
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/base/fd_passing.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/runtime/pool_share.hpp"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: pool_share_peer SOCKET STATE OFFSET BYTES WRITE_OFFSET SEED\n");
    return 2;
  }
  try {
    const std::string state = argv[2];
    const std::uint64_t offset = std::stoull(argv[3]), bytes = std::stoull(argv[4]);
    const std::uint64_t write_offset = std::stoull(argv[5]), seed = std::stoull(argv[6]);
    kern::cuda::ensure_driver();
    kern::cuda::Context context(0);
    kern::UniqueFd sock = kern::connect_unix(argv[1]);
    const kern::runtime::PoolView view = kern::runtime::PoolView::receive(sock.get(), 0, std::chrono::seconds(20));
    std::vector<std::byte> got(bytes);
    view.read(state, offset, got);
    std::string hex;
    hex.reserve(2 * bytes + 1);
    for (std::byte b : got) {
      static const char* digits = "0123456789abcdef";
      hex.push_back(digits[static_cast<unsigned>(b) >> 4]);
      hex.push_back(digits[static_cast<unsigned>(b) & 15]);
    }
    std::printf("%s\n", hex.c_str());
    std::vector<std::byte> mine(bytes);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<std::byte>((i * 7 + seed) & 255);
    view.write(state, write_offset, mine);
    std::fprintf(stderr, "pool_share_peer: %zu chunks of %llu bytes mapped in %zu arenas\n",
                 static_cast<std::size_t>(view.share().chunks),
                 static_cast<unsigned long long>(view.share().chunk_bytes), view.share().arenas.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pool_share_peer: %s\n", e.what());
    return 1;
  }
}
