// Offers between processes (runtime::send_offer / recv_offer; issue 20's handshake): an offer and
// the memfds standing in for its exported buffers cross a socket pair and read back; the received
// offer is what connect takes (PeerOffer::of); a peer that closes, an offer whose fd indices disagree
// with the descriptors that came, and more than 64 descriptors are refused; nothing leaks.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "fd_helpers.hpp"
#include "kern/base/error.hpp"
#include "kern/base/fd_passing.hpp"
#include "kern/runtime/runtime.hpp"

namespace kern::runtime {
namespace {

using namespace std::chrono_literals;
using kern::testing::make_memfd;
using kern::testing::open_fds;
using kern::testing::read_fd;

core::OfferHandle fd_handle(const std::string& target, std::uint64_t bytes, std::uint32_t fd) {
  core::OfferHandle h;
  h.target = target;
  h.bytes = bytes;
  h.fd = fd;
  return h;
}

HeldOffer offer_with(std::initializer_list<std::string> targets) {
  HeldOffer held;
  held.offer.digest = std::string(64, 'c');
  held.offer.ranks["tp"] = 1;
  std::uint32_t i = 0;
  for (const std::string& t : targets) {
    held.offer.handles.push_back(fd_handle(t, 2 << 20, i++));
    held.fds.emplace_back(make_memfd("memory of " + t));
  }
  return held;
}

TEST(OfferTransport, AnOfferAndItsDescriptorsCrossASocket) {
  const std::size_t before = open_fds();
  {
    auto [a, b] = unix_socket_pair();
    const HeldOffer sent = offer_with({"flags", "kv"});
    send_offer(a.get(), sent, 5s);
    const HeldOffer got = recv_offer(b.get(), 5s);
    EXPECT_EQ(got.offer, sent.offer);
    ASSERT_EQ(got.fds.size(), 2u);
    EXPECT_EQ(read_fd(got.fds[0].get()), "memory of flags");
    EXPECT_EQ(read_fd(got.fds[1].get()), "memory of kv");
    const PeerOffer p = PeerOffer::of(got);
    EXPECT_EQ(p.offer, sent.offer);
    EXPECT_EQ(p.fds, (std::vector<int>{got.fds[0].get(), got.fds[1].get()}));
  }
  EXPECT_EQ(open_fds(), before) << "a descriptor leaked";
}

TEST(OfferTransport, BrokenOffersAreRefused) {
  const std::size_t before = open_fds();
  {
    auto [a, b] = unix_socket_pair();
    a.reset();
    EXPECT_THROW(
        {
          try {
            (void)recv_offer(b.get(), 2s);
          } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::Io);
            EXPECT_NE(std::string(e.what()).find("closed before sending its offer"), std::string::npos) << e.what();
            throw;
          }
        },
        Error);
  }
  {  // the offer names descriptor 1, one descriptor came
    auto [a, b] = unix_socket_pair();
    HeldOffer two = offer_with({"flags", "kv"});
    const std::string wire = core::write_offer(two.offer);
    const int one[] = {two.fds[0].get()};
    send_fd_message(a.get(), kern::testing::bytes_of(wire), one, 5s);
    try {
      (void)recv_offer(b.get(), 2s);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
      EXPECT_NE(std::string(e.what()).find("fd"), std::string::npos) << e.what();
    }
  }
  {  // more descriptors than a message carries
    auto [a, b] = unix_socket_pair();
    HeldOffer many;
    many.offer.digest = std::string(64, 'c');
    for (int i = 0; i < 65; ++i) many.fds.emplace_back(make_memfd("x"));
    try {
      send_offer(a.get(), many, 2s);
      ADD_FAILURE() << "sent";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api) << e.what();
    }
  }
  EXPECT_EQ(open_fds(), before) << "a descriptor leaked";
}

}  // namespace
}  // namespace kern::runtime
