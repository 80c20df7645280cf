#include "kern/serve/stop_matcher.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using kern::serve::StopFeed;
using kern::serve::StopMatcher;

struct Fed {
  std::string emitted;
  bool stopped = false;
  std::optional<std::size_t> stop_index;
};

Fed feed_all(const std::vector<std::string>& stops, const std::vector<std::string>& deltas) {
  StopMatcher m(stops);
  Fed r;
  for (const std::string& d : deltas) {
    StopFeed f = m.feed(d);
    r.emitted += f.text;
    if (f.stopped && !r.stopped) {
      r.stopped = true;
      r.stop_index = f.stop_index;
    }
  }
  if (!r.stopped) r.emitted += m.finish();
  return r;
}

TEST(StopMatcher, StopInOneDelta) {
  const Fed r = feed_all({"STOP"}, {"hello STOP world"});
  EXPECT_EQ(r.emitted, "hello ");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 0u);
}

TEST(StopMatcher, StopSplitOverManyDeltas) {
  StopMatcher m({"</answer>"});
  EXPECT_EQ(m.feed("42<").text, "42");
  EXPECT_EQ(m.held(), 1u);
  EXPECT_EQ(m.feed("/").text, "");
  EXPECT_EQ(m.feed("ans").text, "");
  EXPECT_EQ(m.feed("w").text, "");
  const StopFeed f = m.feed("er> tail");
  EXPECT_EQ(f.text, "");
  EXPECT_TRUE(f.stopped);
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.feed("more").text, "");
  EXPECT_TRUE(m.feed("more").stopped);
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"abc"});
  EXPECT_EQ(m.feed("xab").text, "x");
  EXPECT_EQ(m.feed("d").text, "abd");
  EXPECT_EQ(m.feed("a").text, "");
  EXPECT_EQ(m.finish(), "a");
}

TEST(StopMatcher, OverlappingStops) {
  // The first stop to complete wins, even if a longer one began earlier.
  EXPECT_EQ(feed_all({"abcd", "bc"}, {"xa", "b", "cd"}).emitted, "xa");
  EXPECT_EQ(feed_all({"abcd", "bc"}, {"xa", "b", "cd"}).stop_index, 1u);
  // Of two ending at the same byte, the longer.
  const Fed r = feed_all({"c", "abc"}, {"zab", "c"});
  EXPECT_EQ(r.emitted, "z");
  EXPECT_EQ(r.stop_index, 1u);
  // A stop that overlaps itself: "aab" inside "aaab".
  EXPECT_EQ(feed_all({"aab"}, {"a", "a", "a", "b"}).emitted, "a");
  // The held part is the longest suffix any stop begins with.
  StopMatcher m({"xyz", "yq"});
  EXPECT_EQ(m.feed("0xy").text, "0");
  EXPECT_EQ(m.feed("q").text, "x");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, NoStopsKeepsCharactersWhole) {
  StopMatcher m({"", ""});
  EXPECT_EQ(m.feed("a\xE2").text, "a");
  EXPECT_EQ(m.feed("\x82").text, "");
  EXPECT_EQ(m.feed("\xAC!").text, "\xE2\x82\xAC!");
  EXPECT_EQ(m.feed("\xF0\x9F\x98").text, "");
  EXPECT_EQ(m.finish(), "\xF0\x9F\x98");  // generation ended: what is left goes out as it is
}

TEST(StopMatcher, MalformedBytesAreNotHeldForever) {
  StopMatcher m({});
  // A lead byte followed by a non-continuation cannot become a character: release it.
  EXPECT_EQ(m.feed("\xE2x").text, "\xE2x");
  EXPECT_EQ(m.feed("\x80\x80").text, "\x80\x80");
}

TEST(StopMatcher, StopPrefixHeldAcrossCharacter) {
  // Stop "é!" with "é" arriving byte by byte.
  StopMatcher m({"\xC3\xA9!"});
  EXPECT_EQ(m.feed("a\xC3").text, "a");
  EXPECT_EQ(m.feed("\xA9").text, "");
  EXPECT_EQ(m.feed("?").text, "\xC3\xA9?");
}

// Brute-force reference over random strings of a tiny alphabet with multi-byte characters, cut
// into deltas at random bytes (also inside characters). After every feed the emitted text must be
// exactly what the reference computes from the text so far.
TEST(StopMatcher, MatchesBruteForceReference) {
  const std::vector<std::string> alphabet = {"a", "b", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
  std::mt19937 rng(12345);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int stopped_cases = 0;
  for (int iter = 0; iter < 100000; ++iter) {
    std::vector<std::string> stops(static_cast<std::size_t>(pick(0, 3)));
    for (std::string& s : stops) {
      const int len = pick(1, 4);
      for (int i = 0; i < len; ++i) s += alphabet[static_cast<std::size_t>(pick(0, iter % 2 ? 1 : 4))];
    }
    std::string text;
    std::vector<std::size_t> boundaries = {0};
    const int chars = pick(0, 24);
    for (int i = 0; i < chars; ++i) {
      text += alphabet[static_cast<std::size_t>(pick(0, iter % 2 ? 1 : 4))];
      boundaries.push_back(text.size());
    }
    StopMatcher m(stops);
    std::string emitted;
    bool stopped = false;
    std::size_t at = 0;
    while (at < text.size() || at == 0) {
      const std::size_t n = std::min<std::size_t>(text.size() - at, static_cast<std::size_t>(pick(0, 6)));
      const StopFeed f = m.feed(std::string_view(text).substr(at, n));
      at += n;
      emitted += f.text;
      const std::string_view so_far = std::string_view(text).substr(0, at);

      // Reference: the first stop to complete (longest, then first listed, at one end byte).
      std::optional<std::size_t> ref_index;
      std::size_t ref_start = 0;
      for (std::size_t e = 1; e <= so_far.size() && !ref_index; ++e)
        for (std::size_t i = 0; i < stops.size(); ++i) {
          const std::string& s = stops[i];
          if (s.size() <= e && so_far.substr(e - s.size(), s.size()) == s &&
              (!ref_index || s.size() > stops[*ref_index].size())) {
            ref_index = i;
            ref_start = e - s.size();
          }
        }
      if (ref_index) {
        ASSERT_EQ(emitted, so_far.substr(0, ref_start)) << "iter " << iter;
        ASSERT_TRUE(f.stopped || stopped) << "iter " << iter;
        if (!stopped) {
          ASSERT_EQ(f.stop_index, ref_index) << "iter " << iter;
        }
        stopped = true;
      } else {
        ASSERT_FALSE(f.stopped) << "iter " << iter;
        // Everything before the earliest place a stop could still begin, cut back to a
        // character boundary.
        std::size_t alive = so_far.size();
        for (std::size_t i = 0; i < so_far.size() && alive == so_far.size(); ++i)
          for (const std::string& s : stops)
            if (so_far.size() - i < s.size() && s.compare(0, so_far.size() - i, so_far.substr(i)) == 0) {
              alive = i;
              break;
            }
        std::size_t cut = 0;
        for (std::size_t b : boundaries)
          if (b <= alive) cut = b;
        ASSERT_EQ(emitted, so_far.substr(0, cut)) << "iter " << iter << " held " << m.held();
      }
      if (text.empty()) break;
    }
    if (stopped) {
      ++stopped_cases;
      EXPECT_EQ(m.finish(), "");
    } else {
      emitted += m.finish();
      ASSERT_EQ(emitted, text) << "iter " << iter;
    }
  }
  // The random cases must exercise both outcomes.
  EXPECT_GT(stopped_cases, 20000);
  EXPECT_LT(stopped_cases, 90000);
}

}  // namespace
