// A Runtime's state pool mapped by a second process through POSIX fds (issue 20, "a second process
// maps the first one's pool through POSIX fds and reads back bytes the first wrote";
// kern/runtime/pool_share.hpp): the peer program (pool_share_peer) reads bytes the owner wrote
// across a chunk boundary and writes bytes the owner then reads. In one process, through a proxy
// between two socket pairs: a tampered description (chunks larger than the memory), a peer that
// stops sending descriptors, a wrong tag, a remap seen by a fresh description.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gpu_fixture.hpp"
#include "kern/base/fd_passing.hpp"
#include "kern/base/subprocess.hpp"
#include "kern/runtime/pool_share.hpp"

namespace kern::gputest {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kBytesPerToken = 4096;  // 64 KiB pages of 16 tokens

std::string manifest() {
  return R"({
  "schema_version": 5,
  "model": "pool-share",
  "vars": {"seqs": {"max": 4}},
  "states": {"kv": {"bytes_per_token": 4096}, "ssm": {"bytes_per_seq": 196608}},
  "buffers": {
    "block_table": {"dtype": "i32", "shape": ["seqs", 1024], "kind": "input", "domain": {"index_into": "kv", "stride": 16}}
  },
  "modules": {"k": {"source": "runtime_test_kernels", "sha256": "@SHA@"}},
  "ops": {
    "touch_i32": {"params": ["in buffer<i32>", "i32", "i32"],
                  "impl": {"launches": [{"module": "k", "entry": "fill_u32", "block": [32, 1, 1], "grid": [1, 1, 1]}]}},
    "touch_state": {"params": ["inout state", "i32", "i32"],
                    "impl": {"launches": [{"module": "k", "entry": "fill_u32", "block": [32, 1, 1], "grid": [1, 1, 1]}]}}
  },
  "programs": {
    "touch": {"calls": [
      {"op": "touch_i32", "args": [{"buf": "block_table"}, {"i32": 0}, {"i32": 0}]},
      {"op": "touch_state", "args": [{"state": "kv"}, {"i32": 0}, {"i32": 0}]},
      {"op": "touch_state", "args": [{"state": "ssm"}, {"i32": 0}, {"i32": 0}]}
    ]}
  }
})";
}

std::unique_ptr<runtime::Runtime> load_pool() {
  ::setenv("KERN_NO_FABRIC", "1", 1);  // descriptors, whatever the machine grants
  runtime::RuntimeOptions o;
  o.capacity = {49152, 3};  // kv: 192 MiB, three 64 MiB chunks on the lent GPUs
  return load(verified(manifest()), o);
}

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed + (i >> 8)) & 255);
  return v;
}

std::string hex(std::span<const std::byte> b) {
  std::string s;
  for (std::byte x : b) s += fmt::format("{:02x}", static_cast<unsigned>(x));
  return s;
}

std::string peer_program() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "pool_share_peer").string();
}

TEST(PoolShareGpu, ASecondProcessReadsWhatTheOwnerWroteAndWritesWhatItReads) {
  auto rt = load_pool();
  const std::uint64_t chunk = rt->state_pool()->chunk_bytes();
  ASSERT_GE(rt->read_state("kv").size(), chunk + 8192) << "the test wants bytes on both sides of a chunk boundary";
  // Bytes across the first chunk boundary of kv, and the slot state's first slots.
  const std::uint64_t at = chunk - 3000, n = 6000;
  const std::vector<std::byte> mine = pattern(n, 5);
  rt->write_state_at("kv", at, mine);
  const std::uint64_t back_at = chunk + 4096, back_n = 2048;

  const std::string path = fmt::format("@kern-pool-share-{}", ::getpid());
  UniqueFd listener = listen_unix(path);
  std::string send_error;
  pool::PoolShare sent;
  std::thread owner([&] {
    try {
      UniqueFd s = accept_unix(listener.get(), 60s);
      sent = rt->send_pool(s.get(), 20s);
    } catch (const std::exception& e) {
      send_error = e.what();
    }
  });
  const std::string peer = peer_program();
  ASSERT_TRUE(is_executable_file(peer)) << peer;
  const ProcessResult r = run_process({peer, path, "kv", std::to_string(at), std::to_string(n),
                                       std::to_string(back_at), "11"},
                                      90s);
  owner.join();
  EXPECT_EQ(send_error, "");
  ASSERT_TRUE(r.ok()) << r.describe_status() << "\n" << r.err;
  EXPECT_EQ(r.out, hex(mine) + "\n") << "the peer read other bytes than the owner wrote";
  std::printf("[pool-share] %s", r.err.c_str());
  EXPECT_GE(sent.chunks, 3u);
  ASSERT_EQ(sent.arenas.size(), 2u);

  std::vector<std::byte> got(back_n), want(back_n);
  for (std::size_t i = 0; i < back_n; ++i) want[i] = static_cast<std::byte>((i * 7 + 11) & 255);
  rt->read_state_at("kv", back_at, got);
  EXPECT_EQ(hex(got), hex(want)) << "the owner reads other bytes than the peer wrote";
}

// Forwards the owner's messages to the viewer, changing them on the way.
struct Proxy {
  std::function<bool(std::size_t index, FdMessage& m)> edit;  // false: stop forwarding (close)
  void run(int from, int to) {
    for (std::size_t i = 0;; ++i) {
      std::optional<FdMessage> m = recv_fd_message(from, 20s);
      if (!m) return;
      if (!edit(i, *m)) return;
      std::vector<int> fds;
      for (const UniqueFd& f : m->fds) fds.push_back(f.get());
      send_fd_message(to, m->payload, fds, 20s);
    }
  }
};

// Runs the owner's send_pool into a proxy and PoolView::receive on the far side in this process;
// the view's error (or "") and, when it mapped, what it read at [at, at + n) of kv.
std::pair<std::string, std::vector<std::byte>> through(runtime::Runtime& rt, Proxy proxy, std::uint64_t at,
                                                       std::uint64_t n) {
  auto [owner_end, proxy_in] = unix_socket_pair();
  auto [proxy_out, viewer_end] = unix_socket_pair();
  std::thread owner([&, fd = owner_end.get()] {
    try {
      rt.send_pool(fd, 20s);
    } catch (const std::exception&) {  // the proxy stopped reading: expected in some cases
    }
    ::shutdown(fd, SHUT_RDWR);  // the proxy sees the end
  });
  std::thread forward([&, in = proxy_in.get(), out = proxy_out.get()] {
    try {
      proxy.run(in, out);
    } catch (const std::exception&) {
    }
    ::shutdown(out, SHUT_RDWR);
  });
  std::pair<std::string, std::vector<std::byte>> result;
  try {
    const runtime::PoolView view = runtime::PoolView::receive(viewer_end.get(), rt.gpu(), 20s);
    result.second.resize(n);
    view.read("kv", at, result.second);
  } catch (const Error& e) {
    result.first = fmt::format("{}: {}", to_string(e.root_kind()), e.what());
  }
  ::shutdown(viewer_end.get(), SHUT_RDWR);
  ::shutdown(proxy_in.get(), SHUT_RDWR);
  forward.join();
  owner.join();
  return result;
}

TEST(PoolShareGpu, InOneProcessAViewSeesTheBytesAndRefusesWhatWasTamperedWith) {
  auto rt = load_pool();
  const std::uint64_t chunk = rt->state_pool()->chunk_bytes();
  const std::vector<std::byte> mine = pattern(5000, 9);
  rt->write_state_at("kv", chunk - 2500, mine);
  const Proxy plain{[](std::size_t, FdMessage&) { return true; }};
  {
    auto [error, got] = through(*rt, plain, chunk - 2500, 5000);
    EXPECT_EQ(error, "");
    EXPECT_EQ(hex(got), hex(mine));
  }
  const auto edit_description = [](std::function<void(nlohmann::json&)> f) {
    return Proxy{[f](std::size_t i, FdMessage& m) {
      if (i == 0) {
        nlohmann::json j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(m.payload.data()), m.payload.size()));
        f(j);
        const std::string s = j.dump();
        m.payload.assign(reinterpret_cast<const std::byte*>(s.data()), reinterpret_cast<const std::byte*>(s.data()) + s.size());
      }
      return true;
    }};
  };
  {  // chunks said to be twice their size: the driver refuses the mapping
    auto [error, got] = through(*rt, edit_description([](nlohmann::json& j) { j["chunk_bytes"] = j["chunk_bytes"].get<std::uint64_t>() * 2; }), 0, 16);
    EXPECT_NE(error.find("Cuda"), std::string::npos) << error;
  }
  const std::uint64_t chunks = rt->state_pool()->chunks();
  ASSERT_LE(chunks, 64u) << "the cases below assume one message of descriptors";
  {  // one chunk more than the owner sends
    auto [error, got] = through(*rt, edit_description([](nlohmann::json& j) { j["chunks"] = j["chunks"].get<std::uint64_t>() + 1; }), 0, 16);
    EXPECT_NE(error.find(fmt::format("closed after {} of {}", chunks, chunks + 1)), std::string::npos) << error;
  }
  {  // a descriptor lost on the way
    auto [error, got] = through(*rt, Proxy{[](std::size_t i, FdMessage& m) {
                                  if (i == 1) m.fds.pop_back();
                                  return true;
                                }},
                                0, 16);
    EXPECT_NE(error.find(fmt::format("closed after {} of {}", chunks - 1, chunks)), std::string::npos) << error;
  }
  {  // a descriptor message with another tag
    auto [error, got] = through(*rt, Proxy{[](std::size_t i, FdMessage& m) {
                                  if (i == 1) m.payload[0] = std::byte{'X'};
                                  return true;
                                }},
                                0, 16);
    EXPECT_NE(error.find("without the tag"), std::string::npos) << error;
  }
  {  // the description alone, then nothing
    auto [error, got] = through(*rt, Proxy{[](std::size_t i, FdMessage&) { return i == 0; }}, 0, 16);
    EXPECT_NE(error.find("closed after 0 of"), std::string::npos) << error;
  }
  {  // a read where nothing is mapped in the view is an Api error, not a fault
    auto [error, got] = through(*rt, edit_description([](nlohmann::json& j) { j["arenas"][0]["chunks"][0] = -1; }), 0, 16);
    EXPECT_NE(error.find("nothing mapped at position 0"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace kern::gputest
