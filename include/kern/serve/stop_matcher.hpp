// Stop strings over streamed text. Decoded text arrives in pieces (a token's text, or less); a
// stop string may span any number of them. The matcher emits text as soon as it can no longer be
// the start of a stop string, holds back the rest, and stops at the first stop string to
// complete: what came before it is emitted, the stop string itself and everything after never.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kern::serve {

struct StopFeed {
  std::string text;                       // safe to send now (whole UTF-8 characters)
  bool stopped = false;                   // a stop string completed: generation should end
  std::optional<std::size_t> stop_index;  // which of the stop strings, when stopped
};

class StopMatcher {
 public:
  // Empty strings in `stops` are ignored. With no stop strings the matcher only keeps
  // characters whole.
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `delta` to the text. The returned text never ends inside a multi-byte character
  // (an incomplete one at the end is held until the rest arrives) and never includes a suffix
  // that is the beginning of a stop string. When several stop strings occur, the one that ends
  // first in the text wins (of those ending at the same byte, the longest). After a stop,
  // feed() returns nothing.
  StopFeed feed(std::string_view delta);

  // Generation ended without a stop: everything held back (nothing after a stop).
  std::string finish();

  bool stopped() const { return stopped_; }
  // Bytes currently held back.
  std::size_t held() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  std::size_t longest_ = 0;  // bytes of the longest stop string
  std::string pending_;      // text received and not yet emitted
  bool stopped_ = false;
};

}  // namespace kern::serve
