#include "tokenizer/regex_split.hpp"

#include <pcre2.h>

#include "kern/base/error.hpp"

namespace kern::tokenizer {

struct RegexSplitter::Code {
  pcre2_code* code = nullptr;
  ~Code() {
    if (code) pcre2_code_free(code);
  }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return fmt::format("PCRE2 error {}", code);
  return std::string(reinterpret_cast<const char*>(buf));
}

struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (!data) fail(ErrorKind::Api, "out of memory for PCRE2 match data");
  }
  ~MatchData() { pcre2_match_data_free(data); }
};

// A bigger JIT stack for texts whose matches outgrow PCRE2's default 32 KiB.
struct JitStack {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  JitStack() {
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    if (!context || !stack) fail(ErrorKind::Api, "out of memory for a PCRE2 JIT stack");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~JitStack() {
    if (stack) pcre2_jit_stack_free(stack);
    if (context) pcre2_match_context_free(context);
  }
};

}  // namespace

RegexSplitter::RegexSplitter(std::string_view pattern, std::string_view what)
    : pattern_(pattern), code_(std::make_unique<Code>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(), PCRE2_UTF | PCRE2_UCP,
                              &error, &offset, nullptr);
  if (!code_->code) {
    fail(ErrorKind::WeightArtifact, "{}: split regex does not compile at offset {}: {} (pattern {:?})", what, offset,
         pcre2_message(error), pattern_);
  }
  jit_ = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;
RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  MatchData md(code_->code);
  std::unique_ptr<JitStack> big_stack;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t pos = 0;      // where the next search starts
  std::size_t emitted = 0;  // text before this is already in `pieces`
  while (pos < text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.data,
                         big_stack ? big_stack->context : nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !big_stack) {
      big_stack = std::make_unique<JitStack>();
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail(ErrorKind::Api, "split regex failed at byte {}: {}", pos, pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const std::size_t start = ov[0], end = ov[1];
    if (end == start) {  // an empty match: no piece; step over one character
      pos = start + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (start > emitted) pieces.push_back(text.substr(emitted, start - emitted));
    pieces.push_back(text.substr(start, end - start));
    emitted = pos = end;
  }
  if (emitted < text.size()) pieces.push_back(text.substr(emitted));
}

}  // namespace kern::tokenizer
