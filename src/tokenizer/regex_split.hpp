// The pre-tokenizer's Split step: a PCRE2 regex (UTF + UCP, JIT-compiled when PCRE2 has a JIT)
// cuts text into pieces; with HF's "Isolated" behaviour every match is a piece and so is every
// stretch of text between matches.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kern::tokenizer {

class RegexSplitter {
 public:
  // Compiles `pattern`; Error(WeightArtifact) naming `what` when PCRE2 rejects it.
  RegexSplitter(std::string_view pattern, std::string_view what);
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;
  ~RegexSplitter();

  // Appends the pieces of `text` (valid UTF-8) in order; they tile `text` exactly.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;
  const std::string& pattern() const { return pattern_; }
  bool jit() const { return jit_; }

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
  bool jit_ = false;
};

}  // namespace kern::tokenizer
