// kern run's log-probs: OpenAI's `logprobs.content` shape (token text, log-prob, UTF-8 bytes, top
// alternatives), as JSON for --logprobs-file, or as one line per token for stderr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kern/base/json.hpp"
#include "kern/driver/sampling.hpp"
#include "kern/tokenizer/tokenizer.hpp"

namespace kern::cli {

// One entry per generated token; `tok` may be null (ids only).
Json logprobs_json(const std::vector<std::int64_t>& tokens, const std::vector<driver::TokenLogprobs>& logprobs,
                   const tokenizer::Tokenizer* tok);
std::string logprobs_lines(const Json& content);

}  // namespace kern::cli
