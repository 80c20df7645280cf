// fuzz-deps: kern_core kern_base
// libFuzzer target: arbitrary bytes through the multi-GPU handshake's offer parser
// (include/kern/core/handshake.hpp). The first byte says how many descriptors came with the offer
// (0-7), the rest is the text. A malformed offer must be an Error(Io), never a crash, hang or sanitizer
// report; an accepted one must write back to text that parses to the same offer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kern/base/error.hpp"
#include "kern/core/handshake.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t fds = data[0] % 8;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  kern::core::Offer o;
  try {
    o = kern::core::parse_offer(text, fds);
  } catch (const kern::Error& e) {
    if (e.kind() != kern::ErrorKind::Io) std::abort();
    return 0;
  }
  if (!(kern::core::parse_offer(kern::core::write_offer(o), fds) == o)) std::abort();
  return 0;
}
