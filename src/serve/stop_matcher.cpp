#include "kern/serve/stop_matcher.hpp"

#include <algorithm>
#include <utility>

namespace kern::serve {

namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0u) == 0x80u; }

// Bytes of the character a lead byte starts (1 for ASCII and for bytes that start nothing).
std::size_t sequence_length(unsigned char c) {
  if (c >= 0xF0u && c <= 0xF4u) return 4;
  if (c >= 0xE0u) return c <= 0xEFu ? 3 : 1;
  if (c >= 0xC2u) return 2;
  return 1;
}

// The largest cut <= `end` that does not fall inside a multi-byte character which is still
// incomplete or continues past the cut: a character is only split when it is already malformed.
std::size_t whole_character_cut(std::string_view text, std::size_t end) {
  // A character starting at most 3 bytes before `end` may continue past it.
  const std::size_t lowest = end >= 3 ? end - 3 : 0;
  for (std::size_t i = end; i-- > lowest;) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (is_continuation(c)) continue;
    const std::size_t len = sequence_length(c);
    if (len == 1 || i + len <= end) return end;  // the character ends before the cut
    // It continues past `end`: cut before it, unless the bytes present already break it.
    for (std::size_t k = i + 1; k < std::min(text.size(), i + len); ++k)
      if (!is_continuation(static_cast<unsigned char>(text[k]))) return end;
    return i;
  }
  return end;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (s.empty()) continue;
    longest_ = std::max(longest_, s.size());
    stops_.push_back(std::move(s));
  }
}

StopFeed StopMatcher::feed(std::string_view delta) {
  StopFeed out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  const std::size_t old_size = pending_.size();
  pending_.append(delta);
  const std::string_view text = pending_;

  // The first stop string to complete: scan the end positions the new bytes make possible.
  // Matches ending in the held-back part were looked for when it arrived.
  for (std::size_t end = old_size + 1; end <= text.size() && !stopped_; ++end) {
    std::size_t best = stops_.size();
    for (std::size_t i = 0; i < stops_.size(); ++i) {
      const std::string& s = stops_[i];
      if (s.size() > end || text.compare(end - s.size(), s.size(), s) != 0) continue;
      if (best == stops_.size() || s.size() > stops_[best].size()) best = i;
    }
    if (best == stops_.size()) continue;
    // The match starts inside pending_: emitted text is never the start of a stop string.
    out.text.assign(text.substr(0, end - stops_[best].size()));
    out.stopped = true;
    out.stop_index = best;
    stopped_ = true;
  }
  if (stopped_) {
    pending_.clear();
    return out;
  }

  // Hold back the longest suffix that a stop string begins with (shorter than it: a whole one
  // would have matched above).
  std::size_t keep = 0;
  const std::size_t most = std::min(text.size(), longest_ > 0 ? longest_ - 1 : 0);
  for (std::size_t k = most; k > 0 && keep == 0; --k) {
    const std::string_view tail = text.substr(text.size() - k);
    for (const std::string& s : stops_)
      if (s.size() > k && std::string_view(s).substr(0, k) == tail) {
        keep = k;
        break;
      }
  }
  const std::size_t cut = whole_character_cut(text, text.size() - keep);
  out.text.assign(text.substr(0, cut));
  pending_.erase(0, cut);
  return out;
}

std::string StopMatcher::finish() {
  if (stopped_) return {};
  std::string rest = std::move(pending_);
  pending_.clear();
  return rest;
}

}  // namespace kern::serve
